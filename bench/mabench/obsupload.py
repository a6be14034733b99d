"""ModelArts code upload: the SDK's uploader side by side with a plain 10-thread boto3 upload, on moto's S3 server.

One moto server on 127.0.0.1 (its own process, as the tests use it) serves every subject. For each workload (a
code folder of N files: N - 1 small Python-like files of 1-4 KB and one 20 MB file) a run measures, each into a
fresh bucket:

- ``plain``: ``ThreadPoolExecutor(10)`` calling ``client.upload_file`` for every file (boto3's own transfer);
- ``first``: :class:`~malaunch.sdk.backends.modelarts.upload.CodeUploader` into an empty folder, including
  selecting and hashing the files (what ``ma-submit`` does before it uploads);
- ``unchanged``: the same again with nothing changed (the re-submit: one manifest read).

Ratios: ``first`` throughput against ``plain`` (target >= 0.9x) and ``unchanged`` time against ``plain``
(target <= 0.1x). The subjects alternate their order from run to run so neither always meets a warmer server.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from .procs import PYTHON, BenchError, bench_env, free_port, new_mark, scratch_dir
from .results import CaseResult, Series, Target, fmt_ratio, say

__all__ = ["BIG_FILE", "run_obs_upload"]

BIG_FILE = 20 * 1024 * 1024
_AK, _SK, _REGION = "AKBENCHMALAUNCH001", "bench-secret-key-0001", "us-east-1"


def _make_code(root: Path, files: int) -> int:
    rng = random.Random(files)
    (root / "pkg").mkdir(parents=True)
    total = 0
    for index in range(files - 1):
        folder = root / "pkg" / f"m{index // 500:03d}"
        folder.mkdir(exist_ok=True)
        text = "".join(f"VALUE_{index}_{line} = {rng.random()!r}\n" for line in range(rng.randint(30, 120)))
        (folder / f"mod_{index:05d}.py").write_text(text)
        total += len(text)
    (root / "weights.bin").write_bytes(os.urandom(BIG_FILE))
    return total + BIG_FILE


def _moto(log: Path, mark: str) -> Tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    server = os.path.join(os.path.dirname(PYTHON), "moto_server")
    handle = open(log, "wb")  # noqa: SIM115 - the child keeps it; closed when this process ends
    proc = subprocess.Popen(
        [server, "-H", "127.0.0.1", "-p", str(port)],
        env=bench_env(mark, {}),
        stdin=subprocess.DEVNULL,
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise BenchError(f"moto_server did not start; see {log}") from None
            time.sleep(0.1)


def _plain_client(url: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "s3", endpoint_url=url, region_name=_REGION, aws_access_key_id=_AK, aws_secret_access_key=_SK,
        config=Config(s3={"addressing_style": "path"}, max_pool_connections=20),
    )  # fmt: skip


def _plain(url: str, root: Path, bucket: str) -> float:
    client = _plain_client(url)
    client.create_bucket(Bucket=bucket)
    paths = [path for path in root.rglob("*") if path.is_file()]
    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=10) as pool:
        list(pool.map(lambda p: client.upload_file(str(p), bucket, "code/" + p.relative_to(root).as_posix()), paths))
    return time.perf_counter() - began


def _ours(url: str, root: Path, bucket: str, create: bool) -> float:
    from malaunch.sdk.backends.codefiles import select_code_files
    from malaunch.sdk.backends.modelarts.credentials import Credentials, Endpoints
    from malaunch.sdk.backends.modelarts.obs import make_s3_client
    from malaunch.sdk.backends.modelarts.upload import CodeUploader

    creds = Credentials(_AK, _SK, "bench-project", _REGION, "the benchmark")
    client = make_s3_client(Endpoints("http://127.0.0.1:1", url), creds)
    if create:
        client.create_bucket(Bucket=bucket)
    began = time.perf_counter()
    CodeUploader(client, creds, endpoint=url).upload(select_code_files(str(root)), f"obs://{bucket}/code/")
    return time.perf_counter() - began


def _measure(url: str, files: int, reps: int) -> Tuple[Dict[str, Series], int]:
    size = f"{files:,} files"
    series = {
        name: Series(f"obs/{files}/{name}", "obs upload", subject, size, "s")
        for name, subject in (
            ("plain", "plain boto3, 10 threads"),
            ("first", "malaunch, first upload"),
            ("unchanged", "malaunch, unchanged re-upload"),
        )
    }
    root = scratch_dir(f"obs{files}")
    try:
        total = _make_code(root / "code", files)
        for rep in range(reps):
            order: Sequence[str] = ("plain", "ours") if rep % 2 == 0 else ("ours", "plain")
            for subject in order:
                bucket = f"bench-{files}-{rep}-{subject}"
                if subject == "plain":
                    series["plain"].samples.append(_plain(url, root / "code", bucket))
                else:
                    series["first"].samples.append(_ours(url, root / "code", bucket, True))
                    series["unchanged"].samples.append(_ours(url, root / "code", bucket, False))
            say(f"obs upload {size}: run {rep + 1}/{reps} done")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return series, total


def run_obs_upload(sizes: Sequence[int], reps: int) -> CaseResult:
    """The case (see the module docstring)."""
    mark = new_mark()
    log_dir = scratch_dir("moto")
    proc, url = _moto(log_dir / "moto.log", mark)
    all_series: List[Series] = []
    targets: List[Target] = []
    notes: List[str] = []
    try:
        for files in sizes:
            series, total = _measure(url, files, reps)
            all_series += series.values()
            plain, first, unchanged = (series[k].median for k in ("plain", "first", "unchanged"))
            assert plain is not None and first is not None and unchanged is not None
            throughput = plain / first
            share = unchanged / plain
            first_claim = f"first upload >= 0.9x plain throughput ({files:,} files)"
            targets.append(Target(first_claim, fmt_ratio(throughput), throughput >= 0.9))
            targets.append(
                Target(f"unchanged re-upload <= 0.1x plain time ({files:,} files)", fmt_ratio(share), share <= 0.1)
            )
            notes.append(
                f"{files:,} files, {total / 1048576:.0f} MB: plain {plain:.2f} s, first {first:.2f} s "
                f"({throughput:.2f}x the plain throughput), unchanged {unchanged:.3f} s ({share:.3f}x plain)"
            )
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
        shutil.rmtree(log_dir, ignore_errors=True)
    for note in notes:
        say(note)
    return CaseResult("obs-upload", all_series, targets, notes)
