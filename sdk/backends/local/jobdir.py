"""The local backend's job directory: paths, ``state.json`` (written atomically) and finding a job's processes.

Everything the management commands need is in the job directory, so ``status``, ``logs`` and ``stop`` work
from any process. Every process of a job carries ``MALAUNCH_JOB_ID=<id>`` in its environment, which is how
leftovers are found (``/proc/<pid>/environ``) even when their parent died.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional

from malaunch.entrypoint.public import (
    ProcKey,
    env_has,
    is_alive,
    pids_with_env,
    read_environ,
    read_info,
    signal_proven,
)

__all__ = [
    "JOB_ID_VARIABLE",
    "JobPaths",
    "is_job_process",
    "job_processes",
    "kill_processes",
    "pid_alive",
    "read_json",
    "request_json",
    "runner_pid",
    "signal_job_process",
]

JOB_ID_VARIABLE = "MALAUNCH_JOB_ID"


class JobPaths(NamedTuple):
    """Where one job's files are, under ``<home>/jobs/<job id>``: the one place the job folder's layout is spelled.

    ``plan.json``, ``state.json``, ``runner.pid``, ``runner.log``, ``.use.lock`` (:mod:`.retention`), ``code/`` (the
    snapshot), ``rank_table/``, ``outputs/<name>/`` and, per host, ``hosts/<index>/`` with ``console.log``,
    ``report.json`` and ``logs/``.
    """

    home: str
    job_id: str

    @staticmethod
    def jobs_root(home: str) -> str:
        """The folder holding every job's folder."""
        return os.path.join(home, "jobs")

    @property
    def job_dir(self) -> str:
        """The job's folder."""
        return os.path.join(self.jobs_root(self.home), self.job_id)

    @property
    def code_root(self) -> str:
        """The code snapshot's parent (``MA_JOB_DIR``)."""
        return os.path.join(self.job_dir, "code")

    @property
    def rank_table_dir(self) -> str:
        """Where the generated rank table goes."""
        return os.path.join(self.job_dir, "rank_table")

    def output_dir(self, name: str) -> str:
        """The folder of output ``name`` when the job file gives it no path."""
        return os.path.join(self.job_dir, "outputs", name)

    @property
    def checkpoint_dir(self) -> str:
        """The job's checkpoint folder (``MALAUNCH_CHECKPOINT_DIR``): outlives every restart of a rank, a host or
        the job, as the job folder does."""
        return os.path.join(self.job_dir, "checkpoints")

    @property
    def runner_pid_file(self) -> str:
        """The detached runner's pid, written when it is started."""
        return os.path.join(self.job_dir, "runner.pid")

    @property
    def plan_file(self) -> str:
        """The executed plan (ports filled in)."""
        return os.path.join(self.job_dir, "plan.json")

    @property
    def state_file(self) -> str:
        """The job's state, owned by the runner while it lives."""
        return os.path.join(self.job_dir, "state.json")

    @property
    def use_lock(self) -> str:
        """Locked shared while a process reads the job (its logs), alone while the job is deleted."""
        return os.path.join(self.job_dir, ".use.lock")

    @property
    def runner_log(self) -> str:
        """The runner's own output (normally empty)."""
        return os.path.join(self.job_dir, "runner.log")

    def host_dir(self, index: int) -> str:
        """Host ``index``'s folder."""
        return os.path.join(self.job_dir, "hosts", str(index))

    def console_log(self, index: int) -> str:
        """Host ``index``'s shim output."""
        return os.path.join(self.host_dir(index), "console.log")

    def report_file(self, index: int) -> str:
        """Host ``index``'s shim report (``MALAUNCH_REPORT_FILE``)."""
        return os.path.join(self.host_dir(index), "report.json")

    def log_dir(self, index: int) -> str:
        """Host ``index``'s per-rank logs (``MA_LOG_DIR``)."""
        return os.path.join(self.host_dir(index), "logs")


def read_json(path: str) -> Optional[Dict[str, Any]]:
    """The JSON object in ``path``, or None when it is missing or not an object."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def request_json(paths: JobPaths) -> Dict[str, Any]:
    """The ``request`` of the job's ``plan.json``, or {} when it is missing or damaged."""
    request = (read_json(paths.plan_file) or {}).get("request")
    return request if isinstance(request, dict) else {}


def runner_pid(paths: JobPaths, state: Mapping[str, object]) -> Optional[int]:
    """The job's runner: as its state records it, else as its pid file says (None: neither says)."""
    pid = state.get("runner_pid")
    if isinstance(pid, int):
        return pid
    try:
        with open(paths.runner_pid_file, encoding="utf-8") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def pid_alive(pid: Optional[int]) -> bool:
    """True when ``pid`` exists and is not a zombie (an exited child nobody reaped yet)."""
    return pid is not None and pid > 0 and is_alive(pid)


def is_job_process(pid: Optional[int], job_id: str) -> bool:
    """True when ``pid`` is alive and *proven* to belong to the job: its environment carries the job id.

    A process whose environment cannot be read (another user's, or gone) is never the job's.
    """
    if pid is None or pid <= 0 or not pid_alive(pid):
        return False
    environ = read_environ(pid)
    return bool(environ) and env_has(environ or b"", JOB_ID_VARIABLE, job_id)


def signal_job_process(pid: Optional[int], job_id: str, sig: int) -> bool:
    """Send ``sig`` to ``pid`` only if it is the job's (see :func:`is_job_process`), through a pidfd so that a
    reused pid is never hit; True when sent."""
    if pid is None or pid <= 0:
        return False
    info = read_info(pid)
    if info is None:
        return False
    return signal_proven(ProcKey(pid, info.start), sig, lambda p: is_job_process(p, job_id))


def job_processes(job_id: str, exclude: Iterable[int] = ()) -> List[int]:
    """Live processes whose environment has ``MALAUNCH_JOB_ID=<job_id>`` (zombies excluded)."""
    return sorted(key.pid for key in pids_with_env(JOB_ID_VARIABLE, job_id, exclude))


def _signal(pid: int, sig: int, job_id: Optional[str]) -> None:
    if job_id is not None:
        signal_job_process(pid, job_id, sig)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def kill_processes(
    find: Callable[[], List[int]],
    grace: float,
    *,
    deadline: float = 30.0,
    reap: Callable[[], None] = lambda: None,
    sleep: Callable[[float], None] = time.sleep,
    job_id: Optional[str] = None,
) -> List[int]:
    """SIGTERM everything ``find()`` returns, SIGKILL what is left after ``grace`` seconds, repeat until
    ``find()`` is empty or ``grace + deadline`` seconds passed. Returns what is still alive (normally []).

    With ``job_id`` each signal goes only to a process proven to be the job's (:func:`signal_job_process`)."""
    start = time.monotonic()
    termed: set[int] = set()
    while True:
        reap()
        alive = find()
        if not alive:
            return []
        elapsed = time.monotonic() - start
        if elapsed > grace + deadline:
            return alive
        for pid in alive:
            if pid not in termed:
                _signal(pid, signal.SIGTERM, job_id)
                termed.add(pid)
            elif elapsed > grace:
                _signal(pid, signal.SIGKILL, job_id)
        sleep(0.05)
