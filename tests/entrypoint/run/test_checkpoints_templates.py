"""The templates resume through the checkpoint contract (issue 39 §6), run by the real shim as a pod runs it.

The MindSpore template under real msrun writes MindSpore's per-rank layout (``rank_<N>/train.ckpt`` in each
checkpoint); the rank-table template (one process per device, torch with gloo) writes one file per rank. A rank
killed from outside in the middle of the run restarts the job; every rank resumes from the newest complete
checkpoint, the final weights equal, bit for bit, those of a run without a failure, and no rank trains more steps
twice than one checkpoint interval (counted from each rank's own lines in each attempt's log).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from malaunch.entrypoint.run.procs import proctree
from shimutil import assert_nothing_left, free_port, launcher_workers, marked_env, shim, start_shim, write_v10_table

pytestmark = [pytest.mark.process, pytest.mark.timeout(900)]  # two runs each, on a loaded machine

TEMPLATES = Path(__file__).resolve().parents[3] / "templates"
STEPS, EVERY, KILL_AFTER = 12, 3, 5
_STEP = re.compile(r"^rank (\d+) step (\d+)/\d+ ", re.MULTILINE)
_DIGEST = re.compile(r"final weights sha256 ([0-9a-f]{64})")


def _env(tmp_path: Path, method: str) -> Dict[str, str]:
    base = {"MA_MAX_RESTARTS": "2", "MALAUNCH_RESTART_BACKOFF": "0.2", "MALAUNCH_GRACE_PERIOD": "5",
            "MALAUNCH_LOG_DIR": str(tmp_path / "logs"), "MALAUNCH_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
            "OMP_NUM_THREADS": "1"}  # fmt: skip
    if method == "msrun":
        base.update(MA_RUN_METHOD="msrun", MA_NUM_GPUS="2", MA_MSRUN_MASTER_PORT=str(free_port()),
                    MSRUN_CLUSTER_TIME_OUT="120", GLOG_v="3")  # fmt: skip
    else:
        write_v10_table(tmp_path / "table.json", servers=1, devices=2)
        base.update(RANK_TABLE_FILE=str(tmp_path / "table.json"), MALAUNCH_MASTER_PORT=str(free_port()),
                    MA_CURRENT_HOST_IP="127.0.0.1")  # fmt: skip
    return marked_env(base)


def _args(method: str, pause: str) -> List[str]:
    folder = "msrun-mindspore" if method == "msrun" else "ranktable"
    return [str(TEMPLATES / folder / "train.py"), "--steps", str(STEPS), "--every", str(EVERY), "--step-seconds", pause]


def _reached(ckpt: Path, rank: int) -> Optional[Tuple[int, str]]:
    """The step and attempt of ``rank``'s newest progress record (None: none yet, or being replaced)."""
    try:
        record = json.loads((ckpt / ".progress" / f"rank-{rank}.json").read_text())
    except (OSError, ValueError):
        return None
    return int(record["step"]), str(record["attempt"])


def _worker(shim_pid: int, rank: int) -> int:
    """The pid of ``rank``'s worker: under msrun a child of the launcher, in the fan-out the shim's own child."""
    under_launcher = launcher_workers(shim_pid)
    if rank in under_launcher:
        return under_launcher[rank]
    for info in proctree.snapshot().values():
        environ = proctree.read_environ(info.pid) if info.ppid == shim_pid and not info.zombie else None
        if environ and proctree.env_value(environ, "RANK_ID") == str(rank).encode():
            return info.pid
    raise AssertionError(f"no worker of rank {rank} under the shim {shim_pid}")


def _kill_rank_after(proc: subprocess.Popen[str], ckpt: Path, rank: int, step: int) -> None:
    """SIGKILL ``rank``'s worker once its first attempt has recorded ``step`` (waits for that, not for time)."""
    deadline = time.monotonic() + 240
    while True:
        found = _reached(ckpt, rank)
        if found is not None and found[0] >= step and found[1].startswith("0"):
            break
        assert proc.poll() is None and time.monotonic() < deadline, f"rank {rank} never reached step {step}: {found}"
        time.sleep(0.02)
    pid = _worker(proc.pid, rank)
    environ = proctree.read_environ(pid)  # the job's worker of attempt 0, proven by its mark
    assert environ is not None and proctree.env_value(environ, "MALAUNCH_ATTEMPT") == b"0"
    assert proctree.env_value(environ, "MALAUNCH_TEST_MARK") is not None
    os.kill(pid, signal.SIGKILL)


def _steps_by_rank(logs: Path, method: str) -> Dict[int, List[int]]:
    """Every step each rank trained, from its own lines in each attempt's log, in order."""
    pattern = "attempt-*/msrun/worker_*.log" if method == "msrun" else "attempt-*/rank-*.log"
    trained: Dict[int, List[int]] = {}
    for path in sorted(logs.glob(pattern)):
        for rank, step in _STEP.findall(path.read_text(errors="replace")):
            trained.setdefault(int(rank), []).append(int(step))
    return trained


def _run(tmp_path: Path, method: str, kill: bool) -> Tuple[str, str, Dict[int, List[int]]]:
    """Run the template (rank 1 killed after step KILL_AFTER when ``kill``); the final weights' digest, the console
    and every step each rank trained."""
    tmp_path.mkdir()
    env = _env(tmp_path, method)
    if not kill:
        done = shim(_args(method, "0"), env, tmp_path, timeout=600)
        code, out, err = done.returncode, done.stdout, done.stderr
    else:
        proc = start_shim(_args(method, "0.3"), env, tmp_path)
        try:
            _kill_rank_after(proc, tmp_path / "ckpt", 1, KILL_AFTER)
            out, err = proc.communicate(timeout=600)
        finally:
            proc.kill()
            proc.wait()
        code = proc.returncode
    assert code == 0, err[-4000:]
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])
    (digest,) = _DIGEST.findall(out)
    return digest, err, _steps_by_rank(tmp_path / "logs", method)


def _twice(steps: List[int]) -> int:
    return sum(count - 1 for count in Counter(steps).values())


@pytest.mark.parametrize("method", [pytest.param("msrun", marks=pytest.mark.mindspore),
                                    pytest.param("ranktable", marks=pytest.mark.torch)])  # fmt: skip
def test_the_template_resumes_after_a_rank_killed_mid_run_bit_for_bit(tmp_path: Path, method: str) -> None:
    reference, console, trained = _run(tmp_path / "clean", method, kill=False)
    assert trained == {0: list(range(1, STEPS + 1)), 1: list(range(1, STEPS + 1))}
    assert "resumes from" not in console
    digest, console, trained = _run(tmp_path / "killed", method, kill=True)
    assert digest == reference
    ckpt = tmp_path / "killed" / "ckpt"
    assert re.search(rf"attempt 1 resumes from {re.escape(str(ckpt))}/step-\d{{8}} \(step \d+", console), console
    for rank, steps in trained.items():
        assert sorted(set(steps)) == list(range(1, STEPS + 1)), (rank, steps)
        assert 0 < _twice(steps) <= EVERY, (rank, steps)
    assert sorted(trained) == [0, 1]
    newest = ckpt / f"step-{STEPS:08d}"
    assert json.loads((newest / ".complete").read_text())["ranks"] == 2
    part = "train.ckpt" if method == "msrun" else "model.pt"
    assert sorted(path.name for path in newest.iterdir() if not path.name.startswith(".")) == ["rank_0", "rank_1"]
    assert all((newest / f"rank_{rank}" / part).is_file() for rank in (0, 1))
