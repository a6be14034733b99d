"""torchrun's workers see the shim's real attempt counters (issue 16 follow-up).

With ``MA_MAX_RESTARTS > 0`` every attempt is a torchrun of its own with ``--max_restarts=0``, which would
write ``TORCHELASTIC_RESTART_COUNT=0`` and ``TORCHELASTIC_MAX_RESTARTS=0`` into its workers. The attempt stub
(``entrypoint/launchers/torchrun_stub.py``) puts the real values back and ``exec``s the worker: same pid, still
torchrun's direct child. Real torchrun, real processes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from shimutil import assert_nothing_left, free_port, marked_env, start_shim

pytestmark = [pytest.mark.process, pytest.mark.torch]

# Reads only TORCHELASTIC_RESTART_COUNT (as torch's elastic docs tell scripts to); rank 0 fails on attempt 0.
WORKER = """
import json, os, sys
count = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
rank = int(os.environ["RANK"])
ppid = os.getppid()
with open(f"/proc/{ppid}/cmdline", "rb") as fh:
    parent = fh.read().split(b"\\0")
with open(f"/proc/{ppid}/stat", "rb") as fh:
    grandparent = int(fh.read().rsplit(b")", 1)[1].split()[1])
with open("/proc/self/cmdline", "rb") as fh:
    own = [part.decode() for part in fh.read().split(b"\\0") if part]
entry = {"rank": rank, "count": count, "max": os.environ.get("TORCHELASTIC_MAX_RESTARTS"),
         "attempt": os.environ.get("MALAUNCH_ATTEMPT"), "pid": os.getpid(), "ppid": ppid,
         "parent_is_torchrun": b"torch.distributed.run" in parent, "grandparent": grandparent,
         "argv": sys.argv[1:], "cmdline": own}
with open(os.path.join(sys.argv[1], f"starts-{rank}.jsonl"), "a") as fh:
    fh.write(json.dumps(entry) + "\\n")
sys.exit(4 if rank == 0 and count == 0 else 0)
"""


def _starts(folder: Path, rank: int) -> List[Dict[str, Any]]:
    path = folder / f"starts-{rank}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _run(folder: Path, boot: Path, restarts: str) -> tuple[int, int]:
    env = marked_env(
        {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2", "MA_MAX_RESTARTS": restarts,
         "MA_TORCHRUN_MASTER_PORT": str(free_port()), "MALAUNCH_LOG_DIR": str(folder / "logs"),
         "MALAUNCH_RESTART_BACKOFF": "0", "MALAUNCH_RESTART_ON": "always"}
    )  # fmt: skip
    proc = start_shim([str(boot), str(folder), "two words"], env, folder)
    try:
        proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])
    return proc.returncode, proc.pid


def test_python_workers_see_the_attempt_and_the_job_succeeds_on_attempt_1(tmp_path: Path) -> None:
    boot = tmp_path / "worker.py"
    boot.write_text(WORKER)
    code, shim_pid = _run(tmp_path, boot, "3")
    assert code == 0
    for rank in (0, 1):
        starts = _starts(tmp_path, rank)
        seen = [(s["count"], s["max"], s["attempt"]) for s in starts]
        # rank 1 of attempt 0 may be stopped by the ending (rank 0 exits 4 at once) before it writes its line
        assert seen == [(0, "3", "0"), (1, "3", "1")] or (rank == 1 and seen == [(1, "3", "1")]), starts
        for start in starts:
            assert start["parent_is_torchrun"] and start["grandparent"] == shim_pid, start  # torchrun's own child
            assert start["argv"] == [str(tmp_path), "two words"]
            assert start["cmdline"] == [sys.executable, "-u", str(boot), str(tmp_path), "two words"], start
    data = json.loads((tmp_path / "logs" / "report.json").read_text())
    assert [(a["attempt"], a["exit_code"], a["restarted"]) for a in data["attempts"]] == [(0, 4, True), (1, 0, False)]


def test_a_non_python_boot_file_is_execd_as_torchrun_would(tmp_path: Path) -> None:
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    boot = tmp_path / "boot.sh"
    boot.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{worker}" "$@"\n')
    boot.chmod(0o755)
    code, shim_pid = _run(tmp_path, boot, "1")
    assert code == 0
    starts = _starts(tmp_path, 0)
    assert [(s["count"], s["max"]) for s in starts] == [(0, "1"), (1, "1")], starts
    assert all(s["parent_is_torchrun"] and s["grandparent"] == shim_pid for s in starts), starts
    assert os.path.exists(tmp_path / "logs" / "attempt-1")
