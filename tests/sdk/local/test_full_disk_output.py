"""A job that fills its disk keeps what fits (issue 29.1): a local job prints ~1 MB while its jobs folder sits on
a 200 KB tmpfs. The rank's log holds its output up to where the disk filled (under torchrun the worker's own
file may take the disk before the shim's copy of it, ``rank-0.log``, gets any), the foreground ``ma-submit`` and
``logs`` show every line the log holds, and the status says from which byte of which log output was lost.
Before, the runner's reserve for the record of the end took the disk's last free bytes whole and the logs got
none (``rank-0.log`` and ``console.log`` were 0 bytes)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.backends.local.jobdir import job_processes
from sdkutil import job_ids, ma_submit, write_job

pytestmark = [pytest.mark.process]

LINES = 20000
BOOT = f"""
    import os
    for i in range({LINES}):  # ~1 MB into a 200 KB disk; a write the full disk refuses is lost, not fatal
        try:
            os.write(1, b"line %05d " % i + b"y" * 38 + b"\\n")
        except OSError:
            pass
"""
# msrun runs the boot file in its scheduler too; a real MindSpore script's init() holds the scheduler there (it serves
# the cluster and never returns to the script), so only the worker prints: without it the scheduler's log fills the
# disk first and the worker's log is left nothing
MS_BOOT = """
    import mindspore as ms
    from mindspore.communication import init
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    init()
""" + BOOT
LINE = re.compile(r"line \d{5} y{38}")
ENOUGH = 32 << 10  # well below what fits: the disk has ~170 KB free once the job's files are written


def expected(count: int) -> List[str]:
    return [f"line {i:05d} " + "y" * 38 for i in range(count)]


@pytest.fixture
def small_home(home: Path) -> Iterator[Path]:
    """``home`` on a 200 KB tmpfs, unmounted at the end whatever happened (jobs left running are stopped first)."""
    if subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip() != "0":
        pytest.skip("a full disk is emulated with a small tmpfs, which needs root; run the tests as root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(home)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()}); the disk-full test needs one")
    try:
        yield home
    finally:
        backend = LocalBackend(home=str(home))
        for job_id in job_ids(home):
            if job_processes(job_id):
                backend.stop(job_id)
        if subprocess.run(["umount", str(home)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(home)], check=False)


def shown_lines(stdout: str, prefix: str) -> List[str]:
    """The rank's complete output lines the console showed, in order."""
    return [line[len(prefix) :] for line in stdout.splitlines() if line.startswith(prefix)
            and LINE.fullmatch(line[len(prefix) :])]  # fmt: skip


@pytest.mark.parametrize(
    "method",
    [
        "ranktable",
        pytest.param("torchrun", marks=pytest.mark.torch),
        pytest.param("msrun", marks=pytest.mark.mindspore),
    ],
)
def test_a_full_disk_keeps_the_output_that_fits(
    small_home: Path, cli_env: Dict[str, str], tmp_path: Path, method: str
) -> None:
    job = write_job(tmp_path / "code", MS_BOOT if method == "msrun" else BOOT, name="fill")
    done = ma_submit(["--run-method", method, str(job)], cli_env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "full" in done.stderr, done.stderr[-3000:]
    (job_id,) = job_ids(small_home)
    host = small_home / "jobs" / job_id / "hosts" / "0"
    report = json.loads((host / "report.json").read_text())
    log = Path(report["rank_logs"]["0"])
    data = log.read_bytes()
    # under torchrun the worker writes its own file, copied into rank-0.log: the disk may fill with the first
    kept = [log, *sorted(host.glob("logs/torchrun/*/attempt_0/0/stdout.log"))]
    best = max(kept, key=lambda path: path.stat().st_size)
    assert best.stat().st_size >= ENOUGH, f"{[(str(p), p.stat().st_size) for p in kept]}: what fits was not kept"
    ours = (lambda lines: [x for x in lines if LINE.fullmatch(x)]) if method == "msrun" else (lambda lines: lines)
    for path in kept:  # (msrun's worker log has MindSpore's own lines too: only the script's are compared)
        complete = ours(path.read_bytes().decode().split("\n")[:-1])  # the last line may be cut by the full disk
        assert complete == expected(len(complete)), f"{path} must hold the output in order, from its first byte"
        assert len(complete) < LINES, "the disk was expected to fill"
    complete = ours(data.decode().split("\n")[:-1])
    # the console shows every line the log holds: the foreground ma-submit, and logs afterwards
    for stdout in (done.stdout, ma_submit(["logs", job_id], cli_env).stdout):
        shown = ours(shown_lines(stdout, "[host 0 rank 0] "))
        assert shown[: len(complete)] == complete, f"the console showed {len(shown)} of the {len(complete)} lines"
    if method != "msrun":  # msrun's workers write their logs themselves: the shim cannot see what they lost
        said = f"{log} holds the output up to byte {len(data)}, the rest was lost (No space left on device)"
        assert said in done.stderr, done.stderr[-3000:]
        lost = {"log_file": str(log), "from_byte": len(data), "reason": "No space left on device"}
        assert lost in report["lost_output"], report["lost_output"]  # (a launcher's own log may be listed too)
