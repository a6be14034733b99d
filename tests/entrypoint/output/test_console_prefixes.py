"""Issue 43 §2: every console line carries exactly one prefix, of the rank that wrote it.

Real ranks (``scripts/console_mix.py``) start writing at the same moment, each a real ``warnings.warn`` (two
lines in one write to stderr) followed by stdout lines, unbuffered and through an 8 KiB buffer; the shim's
stdout and stderr are one pipe (``2>&1``, as the local backend's ``console.log`` and a terminal are), read
slowly so that the console's writes queue up. Every method (rank-table fan-out, torchrun, msrun), on one host
and on two. Every console line is parsed: it starts with one ``[rank N] `` (or is the shim's or the launcher's
own), and what it says names rank N only. Before the fix the stdout and stderr consoles wrote the prefix and
its line in separate writes to the one file: ``[rank 1] [rank 0] ...`` lines, and lines with none.

Issue 43 §7: under elastic torchrun a worker's log and prefix take the rank its script sees, noted by the
worker's start; the follower waits for that note (the three-host case is in ``test_hosts_elastic.py``).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Dict, List, Mapping

import pytest
from hostsutil import Hosts
from malaunch.entrypoint.launchers.torchrun.logs import TorchrunLogs
from malaunch.entrypoint.launchers.torchrun.stub import RANK_NOTE
from malaunch.entrypoint.run.output.console import Console, consoles
from malaunch.entrypoint.run.output.pump import LineStream, Sink
from malaunch.entrypoint.run.output.splice import SpliceSink
from shimutil import SCRIPTS, assert_nothing_left, die_with_the_test, free_port, marked_env, v10_table
from test_console_lag import SlowReader

MIX = str(SCRIPTS / "console_mix.py")
PREFIX = re.compile(rb"\[rank (\d+)\] ")
TAG = re.compile(rb"@(\d+)@")
OWN = (b"[ma-entrypoint] ", b"[torchrun] ", b"[msrun] ")
LOG_NAME = re.compile(r"(?:rank-|worker_)(\d+)\.log")
ROUNDS = "150"
METHODS = [
    "ranktable",
    pytest.param("torchrun", marks=pytest.mark.torch),
    pytest.param("msrun", marks=pytest.mark.mindspore),
]


def misplaced(console: bytes, logs: Mapping[int, bytes]) -> List[str]:
    """The console lines that break the rule: no prefix, two, or another rank's words. A line without a tag is
    a piece of a line shown before its end came (``HOLD_SECONDS``): it must be a piece of its rank's log."""
    bad: List[str] = []
    for line in console.split(b"\n"):
        if not line:
            continue
        match = PREFIX.match(line)
        if match is None:
            if not (line.startswith(OWN) and not TAG.search(line)):
                bad.append(f"no rank prefix: {line[:160]!r}")
            continue
        rank, content = int(match.group(1)), line[match.end() :]
        tags = {int(tag) for tag in TAG.findall(content)}
        if b"[rank " in content:
            bad.append(f"two prefixes: {line[:160]!r}")
        elif tags - {rank}:
            bad.append(f"rank {rank}'s prefix on rank {sorted(tags - {rank})}'s words: {line[:160]!r}")
        elif not tags and content not in logs.get(rank, b""):
            bad.append(f"not in rank {rank}'s log: {line[:160]!r}")
    return bad


def rank_logs(folder: Path) -> Dict[int, bytes]:
    """Every rank's log under ``folder`` (``rank-N.log``; msrun's ``worker_N.log``), by rank."""
    logs: Dict[int, bytes] = {}
    for path in sorted(folder.rglob("*.log")):
        found = LOG_NAME.fullmatch(path.name)
        if found:
            logs[int(found.group(1))] = logs.get(int(found.group(1)), b"") + path.read_bytes()
    return logs


def check(console: bytes, logs: Mapping[int, bytes], ranks: range) -> None:
    assert sorted(logs) == list(ranks), sorted(logs)
    for rank in ranks:  # every rank ran to its end, and its log has it whole
        assert b"@%d@ done\n" % rank in logs[rank]
        assert re.search(rb"(?m)^\[rank %d\] @%d@ done$" % (rank, rank), console), console[-3000:]
    bad = misplaced(console, logs)
    assert not bad, "\n".join(bad[:20])


def _method_env(method: str, hosts: int, per_host: int, tmp: Path) -> Dict[str, str]:
    if method == "ranktable":
        table = tmp / "table.json"
        table.write_text(json.dumps(v10_table(hosts, per_host)))
        return {"RANK_TABLE_FILE": str(table), "MALAUNCH_MASTER_PORT": str(free_port())}
    if method == "torchrun":
        return {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": str(per_host), "MA_TORCHRUN_MASTER_PORT": str(free_port())}
    return {"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": str(per_host), "MA_MSRUN_MASTER_PORT": str(free_port()),
            "MSRUN_CLUSTER_TIME_OUT": "120"}  # fmt: skip


def _mix_env(folder: Path) -> Dict[str, str]:
    return {"CONSOLE_MIX_DIR": str(folder), "CONSOLE_MIX_ROUNDS": ROUNDS, "CONSOLE_MIX_BUFFERED": "odd"}


@pytest.mark.process
@pytest.mark.timeout(900)
@pytest.mark.parametrize("method", METHODS)
def test_every_line_of_one_host_has_one_prefix_of_the_rank_that_wrote_it(tmp_path: Path, method: str) -> None:
    runs = 4 if method == "ranktable" else 2  # bounded: torchrun and msrun take seconds to start
    for run in range(runs):
        folder = tmp_path / f"run{run}"
        folder.mkdir()
        env = marked_env({**_method_env(method, 1, 3, folder), **_mix_env(folder),
                          "MALAUNCH_LOG_DIR": str(folder / "logs")})  # fmt: skip
        reader = SlowReader(folder / "console", piece=4096, nap=0.0005)
        proc = subprocess.run([sys.executable, "-m", "malaunch.entrypoint", MIX], env=env, cwd=folder,
                              stdin=subprocess.DEVNULL, stdout=reader.write_end, stderr=reader.write_end,
                              timeout=300, preexec_fn=die_with_the_test())  # fmt: skip
        console = reader.close()
        assert_nothing_left(env["MALAUNCH_TEST_MARK"])
        assert proc.returncode == 0, console[-3000:]
        check(console, rank_logs(folder / "logs"), range(3))


@pytest.mark.process
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "method",
    [
        "ranktable",
        pytest.param("torchrun", marks=pytest.mark.torch),
        pytest.param("msrun", marks=[pytest.mark.mindspore, pytest.mark.netns]),
    ],
)
def test_every_line_of_two_hosts_has_one_prefix_of_the_rank_that_wrote_it(
    hosts: List[Hosts], tmp_path: Path, method: str
) -> None:
    readers = {index: SlowReader(tmp_path / f"console{index}", piece=4096, nap=0.0005) for index in (0, 1)}
    try:
        job = Hosts(tmp_path, 2, {**_method_env(method, 2, 2, tmp_path), **_mix_env(tmp_path)}, script="console_mix.py",
                    netns=method == "msrun", consoles={i: r.write_end for i, r in readers.items()})  # fmt: skip
        hosts.append(job)
        job.start_all()
        codes = [job.wait(0, timeout=300), job.wait(1, timeout=300)]
    finally:
        shown = {index: reader.close() for index, reader in readers.items()}
    assert codes == [0, 0], shown[0][-3000:] + shown[1][-3000:]
    for index in (0, 1):
        check(shown[index], rank_logs(tmp_path / f"h{index}"), range(2 * index, 2 * index + 2))


def test_stdout_and_stderr_of_one_file_share_one_queue_and_never_split_a_line_from_its_prefix() -> None:
    """Two producers, one on each stream, a partial line among them: one writer, one order, whole lines."""
    read_fd, write_fd = os.pipe()
    got = bytearray()

    def read() -> None:
        while True:
            data = os.read(read_fd, 1 << 16)
            if not data:
                return
            got.extend(data)

    reader = threading.Thread(target=read)
    reader.start()
    with os.fdopen(write_fd, "wb", closefd=False) as out, os.fdopen(os.dup(write_fd), "wb") as err:
        stdout, stderr = consoles(out, err)
        assert stdout.shared and stderr.shared
        streams = [LineStream(stdout, b"[rank 0] ", None), LineStream(stderr, b"[rank 1] ", None)]
        partial = LineStream(stdout, b"[rank 2] ", None)
        partial.feed(b"@2@ par", 7)
        partial.flush_partial()  # shown before its end: no other line may be glued to it

        def produce(rank: int) -> None:
            for number in range(3000):
                text = b"@%d@ line %d %s\n@%d@ second\n" % (rank, number, b"@%d@" % rank * (number % 300), rank)
                streams[rank].feed(text, len(text))

        threads = [threading.Thread(target=produce, args=(rank,)) for rank in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        partial.feed(b"tial @2@\n", 9)
        stdout.close(5.0)
        stderr.message("[ma-entrypoint] the last line")  # stderr is still open after stdout closed
        stderr.close(5.0)
    os.close(write_fd)
    reader.join(30)
    os.close(read_fd)
    assert got.startswith(b"[rank 2] @2@ par\n") and b"\n[rank 2] tial @2@\n" in got
    assert got.endswith(b"\n[ma-entrypoint] the last line\n")
    assert not misplaced(bytes(got), {})
    assert got.count(b"second\n") == 6000


def test_consoles_of_two_files_stay_apart() -> None:
    out, err = io.BytesIO(), io.BytesIO()
    stdout, stderr = consoles(out, err)
    assert not stdout.shared and not stderr.shared
    stdout.message("to stdout")
    stderr.message("to stderr")
    stdout.close(1.0)
    stderr.close(1.0)
    assert (out.getvalue(), err.getvalue()) == (b"to stdout\n", b"to stderr\n")
    assert isinstance(stdout, Console)


def test_an_elastic_workers_files_are_followed_once_its_rank_is_noted_and_its_log_takes_that_rank(
    tmp_path: Path,
) -> None:
    """Issue 43 §7: torchrun's worker folders as an elastic attempt leaves them; place ranks 4 and 5 of this
    host are ranks 1 and 0 to the scripts (the rendezvous's order). A worker without its note and without
    output is not followed yet; with output but no note (no stub), its place's name stays."""
    logs = tmp_path / "torchrun"
    logs.mkdir()
    out, err = io.BytesIO(), io.BytesIO()
    stdout, stderr = consoles(out, err)
    sinks = {rank: SpliceSink(str(tmp_path / f"rank-{rank}.log"), lambda text: None) for rank in (4, 5, 6)}
    named: List[tuple[int, int]] = []
    follower = TorchrunLogs(str(logs), [4, 5, 6], sinks, Sink(str(tmp_path / "torchrun.log"), lambda text: None),
                            stdout, stderr, lambda place, rank: named.append((place, rank)))  # fmt: skip
    attempt = logs / "job_abc" / "attempt_0"
    for local in ("0", "1", "2"):
        (attempt / local).mkdir(parents=True)
        for name in ("stdout.log", "stderr.log"):
            (attempt / local / name).touch()
    follower.poll()
    assert named == [] and follower._attempts[str(attempt)] == set()  # no worker started: nothing followed
    (attempt / "1" / RANK_NOTE).write_text("0")
    (attempt / "2" / "stdout.log").write_text("@6@ no note\n")
    follower.poll()
    assert named == [(5, 0)] and follower._attempts[str(attempt)] == {"1", "2"}
    (attempt / "0" / RANK_NOTE).write_text("1")
    follower.poll()
    assert named == [(5, 0), (4, 1)]
    follower.finish()
    for sink in sinks.values():
        sink.close()
    assert (tmp_path / "rank-6.log").read_bytes() == b"@6@ no note\n"
