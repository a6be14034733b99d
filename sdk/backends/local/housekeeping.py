"""Looking after the local backend's jobs: stopping one (a waiting one leaves the queue), deleting one, playing the
platform that loses a host's machine and gives it back, and removing the jobs whose time is up (``keep_for``,
``prune``).

A stopped job has nothing left running: its runner is asked to tear the hosts down, then every process proven the
job's is killed and its network removed, and a state the runner did not finish is recorded STOPPED.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING, AbstractSet, List, Optional

from ...errors import BackendError, ConfigError
from ...status import JobState, JobStatus
from .history import History
from .hostnet import tear_down_recorded
from .jobdir import JobPaths, is_job_process, job_processes, kill_processes, request_json, signal_job_process
from .queue.waiting import unqueue
from .retention import expire_due, prune_home, prune_lock, remove_jobs
from .state import StateWriter, read_state

if TYPE_CHECKING:
    from ..base import PruneResult
    from .query import JobReader

__all__ = ["Housekeeper"]


class Housekeeper:
    """Stops, deletes and removes the jobs ``jobs`` reads; loses and restores their hosts."""

    def __init__(self, jobs: JobReader) -> None:
        self.jobs = jobs
        self.home = jobs.home

    def stop(self, job_id: str) -> JobStatus:
        jobs = self.jobs
        paths = jobs.paths(job_id)
        job_id = paths.job_id  # the full id when a prefix was given
        if unqueue(self.home, paths):
            return jobs.status_of(paths)
        status = jobs.status_of(paths)
        request = request_json(paths)
        grace = request.get("grace_period", 30.0)
        grace = float(grace) if isinstance(grace, (int, float)) and 0 <= grace < 3600 else 30.0
        reading = read_state(paths.state_file)
        state = reading.data or {}
        runner = jobs.runner_pid(paths, state)
        if runner is not None and not status.is_terminal and signal_job_process(runner, job_id, signal.SIGTERM):
            deadline = time.monotonic() + grace + 30.0
            while is_job_process(runner, job_id) and time.monotonic() < deadline:
                jobs.runner_pid(paths, state)
                time.sleep(0.05)
        left = kill_processes(lambda: job_processes(job_id, exclude=(os.getpid(),)), grace=grace, job_id=job_id)
        if left:
            raise BackendError(f"job {job_id}: processes {left} survived SIGKILL; check them with 'ps -p'")
        tear_down_recorded(request)
        final = read_state(paths.state_file).data
        if final is not None and not JobState(final["state"]).is_terminal:
            final.update(state="STOPPED", exit_code=128 + signal.SIGTERM, ended_at=time.time())
            final["message"] = "; ".join(filter(None, [final["message"], "stopped after the runner was gone"]))
            for host in final["hosts"]:
                if host["state"] == "RUNNING":
                    host["state"] = "EXITED"
            StateWriter(paths).save_final(final)
        return jobs.status_of(paths)

    def delete(self, job_id: str) -> str:
        paths = self.jobs.paths(job_id)
        unqueue(self.home, paths)  # a waiting job goes at once
        status = self.jobs.status_of(paths)
        left = job_processes(paths.job_id)
        if left or not (status.is_terminal or status.state is JobState.UNKNOWN):
            raise ConfigError(
                f"job {paths.job_id} is {status.state.value} (processes {left or 'starting'})",
                paths.job_id,
                f"stop it first: 'ma-submit stop {paths.job_id}'",
            )
        try:
            with prune_lock(self.home):
                _, refused, _ = remove_jobs(self.home, [paths.job_id], dry_run=False, busy=set(), strict=True)
        except OSError as exc:
            raise BackendError(f"cannot delete {paths.job_dir}: {exc.strerror or exc}; check its permissions") from None
        if refused:
            raise ConfigError(f"job {paths.job_id} is in use", paths.job_id, refused[0][1])
        return paths.job_id

    # -- the platform's part: a host's machine lost and given back (:mod:`.hostops`) ---------------------------
    def lose_host(self, job_id: str, host: int) -> JobStatus:
        from .hostops import ask_runner

        paths = self.jobs.paths(job_id)
        ask_runner(paths, self.jobs.status_of(paths), host, "lose", lambda: _host_state(paths, host) != "RUNNING")
        return self.jobs.status_of(paths)

    def restore_host(self, job_id: str, host: int) -> JobStatus:
        from .hostops import ask_runner

        paths = self.jobs.paths(job_id)
        ask_runner(paths, self.jobs.status_of(paths), host, "restore", lambda: _host_state(paths, host) == "RUNNING")
        return self.jobs.status_of(paths)

    # -- retention (keep_for, prune) -------------------------------------------------------------------------
    def expire(self, now: float) -> List[str]:
        return sorted(expire_due(self.home, History(self.home).snapshot(self.jobs.read_for_history), now))

    def prune(self, older_than: float, *, now: Optional[float], states: AbstractSet[str], keep: int,
              dry_run: bool) -> PruneResult:  # fmt: skip
        self.jobs.check_home()
        when = time.time() if now is None else now
        return prune_home(self.home, self.jobs.read_for_history, older_than, now=when, states=states, keep=keep,
                          dry_run=dry_run)  # fmt: skip


def _host_state(paths: JobPaths, host: int) -> str:
    hosts = (read_state(paths.state_file).data or {}).get("hosts") or []
    return str(hosts[host]["state"]) if 0 <= host < len(hosts) else ""
