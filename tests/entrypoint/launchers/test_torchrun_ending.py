"""Under torchrun the shim's grace bounds the ending, whatever torchrun waits for (issue 16.2): real torchrun,
ranks that ignore SIGTERM and SIGINT (torchrun itself would wait 30 s before its SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List

import pytest
from shimutil import (
    MARK,
    SCRIPTS,
    assert_nothing_left,
    free_port,
    launcher_workers,
    marked_env,
    start_shim,
    wait_reaped,
    wait_watched,
)

# Well below torchrun's own 30 s wait for workers that ignore SIGTERM: a job that ends within it was ended by
# the shim (a bound on a hang, not a speed measure).
BEFORE_TORCHRUN_GIVES_UP = 25


def _start(tmp_path: Path, grace: str, args: List[str]) -> tuple[subprocess.Popen[str], Dict[str, str], Path]:
    folder = tmp_path / "sync"
    folder.mkdir()
    env = marked_env(
        {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2", "MA_TORCHRUN_MASTER_PORT": str(free_port()),
         "MALAUNCH_GRACE_PERIOD": grace, "MALAUNCH_LOG_DIR": str(tmp_path / "logs"),
         "MALAUNCH_REPORT_FILE": str(tmp_path / "report.json")}
    )  # fmt: skip
    proc = start_shim([str(SCRIPTS / "stubborn.py"), str(folder), *args], env, tmp_path)
    deadline = time.monotonic() + 120
    while len(list(folder.glob("ready-*"))) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    wait_watched(proc, 2)
    return proc, env, folder


def _end(proc: subprocess.Popen[str]) -> int:
    try:
        proc.communicate(timeout=BEFORE_TORCHRUN_GIVES_UP)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.communicate()
    return proc.returncode


@pytest.mark.process
@pytest.mark.parametrize("gap", [0.05, 0.05, 1.0])  # 1 s: torchrun is gone, the shim waits for its ranks
def test_second_sigint_ends_everything_at_once(tmp_path: Path, gap: float) -> None:
    proc, env, _ = _start(tmp_path, "600", [])  # only the second signal can end this before torchrun's 30 s
    os.kill(proc.pid, signal.SIGINT)
    time.sleep(gap)
    os.kill(proc.pid, signal.SIGINT)
    assert _end(proc) == 130
    assert_nothing_left(env[MARK])
    assert json.loads((tmp_path / "report.json").read_text())["status"] == "stopped"


@pytest.mark.process
@pytest.mark.parametrize("repeat", range(2))
def test_failure_seen_late_ends_within_the_shims_grace_with_the_ranks_code(tmp_path: Path, repeat: int) -> None:
    # rank 0 exits 5 while the shim is stopped (torchrun reaps it first and starts its own 30 s wait for rank 1)
    proc, env, folder = _start(tmp_path, "3", ["0", "5"])
    rank0 = launcher_workers(proc.pid)[0]
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        (folder / "go").touch()
        wait_reaped(rank0)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    assert _end(proc) == 5
    assert_nothing_left(env[MARK])
    cause = json.loads((tmp_path / "report.json").read_text())["root_cause"]
    assert (cause["rank"], cause["exit_code"]) == (0, 5)
