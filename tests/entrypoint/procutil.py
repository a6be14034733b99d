"""Helpers for the supervisor's process tests: plans built from tiny scripts, and proof that nothing is left.

Every process a test starts carries ``MALAUNCH_TEST_MARK=<unique value>`` in its environment (grandchildren
inherit it), so :func:`assert_nothing_left` can scan ``/proc`` for leftovers even when a pid was never seen.
"""

from __future__ import annotations

import io
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from malaunch.entrypoint.launchers.running import run_plan
from malaunch.entrypoint.plan.launch_plan import LaunchPlan, ProcessSpec
from malaunch.entrypoint.report.report import RunResult
from malaunch.entrypoint.run.procs import proctree

__all__ = [
    "BIN",
    "MARK_VAR",
    "PY",
    "alive",
    "assert_nothing_left",
    "child_pids",
    "make_plan",
    "new_mark",
    "pids_with_env",
    "plan_from_json",
    "read_info",
    "run",
    "unprefix",
    "wait_until",
    "worker_spec",
]

PY = sys.executable
BIN = Path(__file__).resolve().parent / "bin"
MARK_VAR = "MALAUNCH_TEST_MARK"


def new_mark() -> str:
    return uuid.uuid4().hex


def worker_spec(
    rank: Optional[int],
    log_dir: Path,
    *args: str,
    mark: str,
    script: str = "worker.py",
    env: Optional[Mapping[str, str]] = None,
    name: Optional[str] = None,
    cwd: Optional[str] = None,
) -> ProcessSpec:
    """A process running ``bin/<script> *args`` as ``rank``."""
    environ = {MARK_VAR: mark, **(env or {})}
    if rank is not None:
        environ.update(RANK=str(rank), LOCAL_RANK=str(rank))
    label = name or (f"rank-{rank}" if rank is not None else "main")
    return ProcessSpec(
        name=label,
        argv=(PY, str(BIN / script), *args),
        env=environ,
        cwd=cwd,
        log_file=str(log_dir / f"{label}.log"),
        rank=rank,
        local_rank=rank,
    )


def make_plan(
    log_dir: Path,
    processes: Sequence[ProcessSpec],
    *,
    log_source: str = "pipe",
    method: Optional[str] = None,
    rank_logs: Optional[Mapping[int, str]] = None,
    grace: float = 5.0,
) -> LaunchPlan:
    if rank_logs is None:
        rank_logs = {p.rank: p.log_file for p in processes if p.rank is not None}
    default_method = {"pipe": "ranktable", "attempt_files": "torchrun", "files": "msrun"}[log_source]
    return LaunchPlan(
        method=method or default_method,
        node_rank=0,
        num_hosts=1,
        host="test-host",
        processes=tuple(processes),
        log_source=log_source,
        log_dir=str(log_dir),
        rank_logs=dict(rank_logs),
        grace_period=grace,
        report_file=str(log_dir / "report.json"),
    )


def plan_from_json(data: Mapping[str, Any]) -> LaunchPlan:
    """Inverse of ``LaunchPlan.to_json`` (the driver script uses it): the plan's own reader."""
    return LaunchPlan.from_json(data)


def run(plan: LaunchPlan, env: Optional[Mapping[str, str]] = None) -> Tuple[RunResult, bytes, bytes]:
    """run_plan with captured consoles; returns (result, console stdout, console stderr)."""
    out, err = io.BytesIO(), io.BytesIO()
    result = run_plan(plan, dict(os.environ if env is None else env), console_out=out, console_err=err)
    return result, out.getvalue(), err.getvalue()


def unprefix(console: bytes, prefix: bytes) -> bytes:
    """The bytes one producer wrote, from a console that only it wrote to."""
    assert console.startswith(prefix), console[:200]
    return console[len(prefix) :].replace(b"\n" + prefix, b"\n")


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


def read_info(info_dir: Path, rank: int, timeout: float = 20.0) -> Dict[str, Any]:
    path = info_dir / f"{rank}.json"
    assert wait_until(path.exists, timeout), f"{path} never appeared"
    data: Dict[str, Any] = json.loads(path.read_text())
    return data


def alive(pid: int) -> bool:
    """Exists and is not a zombie."""
    return proctree.is_alive(pid)


def pids_with_env(name: str, value: str) -> List[int]:
    return sorted(key.pid for key in proctree.pids_with_env(name, value))


#: Set to 1 in a server a worker keeps for its whole session (moto's: tests/sdk/moto_env.py): a child of the
#: test process that no test left behind.
SESSION_SERVER_VAR = "MALAUNCH_TEST_SESSION_SERVER"


def child_pids() -> List[int]:
    """Children of this test process, zombies included, but not a session's server (:data:`SESSION_SERVER_VAR`)."""
    me = os.getpid()
    found = []
    for info in proctree.descendants(me):
        if info.ppid != me:
            continue
        environ = proctree.read_environ(info.pid)
        if environ is not None and proctree.env_has(environ, SESSION_SERVER_VAR, "1"):
            continue
        found.append(info.pid)
    return found


def assert_nothing_left(
    mark: str, pids: Iterable[int] = (), token: Optional[str] = None, timeout: float = 0.0, children: bool = True
) -> None:
    """No process with the test's mark (or the run's token) and none of ``pids`` is alive.

    ``timeout`` > 0 allows that long for processes killed by someone else (a watchdog) to disappear.
    ``children`` also checks that this test process has no child left, not even a zombie.
    """
    known = list(pids)

    def leftovers() -> List[int]:
        found = set(pids_with_env(MARK_VAR, mark)) | {p for p in known if alive(p)}
        if token:
            found |= set(pids_with_env("MALAUNCH_SHIM_TOKEN", token))
        return sorted(found)

    if timeout:
        wait_until(lambda: not leftovers(), timeout)
    left = leftovers()
    assert not left, f"processes left running: {left}"
    if children:
        left_children = child_pids()
        assert not left_children, f"children of the test process left (zombies?): {_described(left_children)}"


def _described(pids: Iterable[int]) -> str:
    """Each pid with its state and command line, as /proc has them (an earlier test's leftover is named so)."""
    found = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            state, argv = "?", ""
        found.append(f"{pid} ({state}) {argv or '<no command line: a zombie>'}")
    return "; ".join(found)
