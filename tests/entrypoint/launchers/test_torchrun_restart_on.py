"""torchrun never restarts what ``restart_on`` refuses, however late the shim sees the death (issue 16.2):
each attempt is a torchrun with ``--max_restarts=0`` and the shim's loop makes the next one. Proven the hard
way: the shim is stopped (SIGSTOP) across the failure until torchrun has reaped the failed rank, so the shim can
never look before torchrun does: every run is that worst case, one run each."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from shimutil import SCRIPTS, assert_nothing_left, free_port, marked_env, start_shim, wait_reaped

pytestmark = [pytest.mark.process, pytest.mark.torch]


def _starts(folder: Path, rank: int) -> List[Dict[str, Any]]:
    path = folder / f"starts-{rank}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _run_with_the_shim_stopped_across_the_failure(folder: Path, mode: str, restarts: str) -> int:
    env = marked_env(
        {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2", "MA_MAX_RESTARTS": restarts, "MALAUNCH_GRACE_PERIOD": "5",
         "MA_TORCHRUN_MASTER_PORT": str(free_port()), "MALAUNCH_LOG_DIR": str(folder / "logs"),
         "MALAUNCH_RESTART_BACKOFF": "0", "FLAKY_DELAY": "1.0"}
    )  # fmt: skip
    proc = start_shim([str(SCRIPTS / "flaky.py"), str(folder), mode, "0,1,2"], env, folder)
    try:
        deadline = time.monotonic() + 120
        while not (_starts(folder, 0) and _starts(folder, 1)):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGSTOP)  # rank 0 fails 1 s after its start: torchrun sees it, the shim does not
        wait_reaped(_starts(folder, 0)[0]["pid"])
        os.kill(proc.pid, signal.SIGCONT)
        proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.communicate()
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])
    return proc.returncode


def test_exit_2_is_never_restarted_by_torchrun_seen_late(tmp_path: Path) -> None:
    code = _run_with_the_shim_stopped_across_the_failure(tmp_path, "exit2", "2")
    assert code == 2
    for rank in (0, 1):  # no second start of any rank: nobody restarted the group
        assert [s["attempt"] for s in _starts(tmp_path, rank)] == [0], rank
    data = json.loads((tmp_path / "logs" / "report.json").read_text())
    assert [(a["attempt"], a["exit_code"], a["restarted"]) for a in data["attempts"]] == [(0, 2, False)]
    assert (data["root_cause"]["rank"], data["failure_class"]["class"]) == (0, "user_error")


def test_a_retryable_failure_seen_late_is_restarted_by_the_shim_as_allowed(tmp_path: Path) -> None:
    code = _run_with_the_shim_stopped_across_the_failure(tmp_path, "kill9", "1")
    assert code == 137  # attempt 0 and the one restart both fail (attempts 0,1,2 fail)
    assert [s["attempt"] for s in _starts(tmp_path, 0)] == [0, 1]
    data = json.loads((tmp_path / "logs" / "report.json").read_text())
    assert [(a["attempt"], a["exit_code"], a["restarted"]) for a in data["attempts"]] == [(0, 137, True),
                                                                                          (1, 137, False)]  # fmt: skip
