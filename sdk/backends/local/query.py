"""Reading the local backend's jobs: finding one by id or prefix, its status, logs, events, usage and exec, and the
list of every job (from the history index).

Every call reads the job's folder only, so it works from any process. The modules that only some verbs need
(following logs, the history index, looking inside a job) are imported by the call that needs them: ``status``,
``list``, ``logs`` and ``stop`` are started often.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
import time
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ...errors import ConfigError, JobNotFound, JobStateUnknown, WaitTimeout
from ...home import close_id, one_by_prefix
from ...status import JobState, JobStatus
from ..base import Pace, UnknownWatch
from ..listing import ListQuery
from ..logtail import follow_files
from .consolelog import merged_lines, missing_lines
from .history import History
from .jobdir import JobPaths, is_job_process, pid_alive, read_json, request_json, runner_pid
from .pending import pending_reason
from .queue.waiting import queue_reason, queued, take_over
from .retention import expire_due, reading
from .state import StateReading, job_status, read_state

if TYPE_CHECKING:
    from ...spec.resume import ResumeRef
    from ..checkpoints import CheckpointListing
    from ..events import JobEvent
    from ..inside import ExecResult, UsageReport
    from ..listing import ListPage
    from .setup import LocalSetup

__all__ = ["JobReader"]

_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
# A process caught inside exec (just after Popen returned) shows an empty /proc/<pid>/environ for a moment.
_EXEC_SETTLE = 0.5


class JobReader:
    """Finds the local backend's jobs and reads them (``name``: the backend's, for the statuses)."""

    def __init__(self, setup: LocalSetup, name: str) -> None:
        self.setup = setup
        self.name = name
        self.home = setup.home

    # -- finding a job -------------------------------------------------------------------------------------
    def _job_names(self) -> List[str]:
        root = JobPaths.jobs_root(self.home)
        try:
            names = os.listdir(root)
        except OSError:
            return []
        return sorted(n for n in names if _JOB_ID.match(n) and os.path.isdir(os.path.join(root, n)))

    def resolve_id(self, job_id: str) -> str:
        """``job_id`` itself, or the one job whose id starts with it."""
        if _JOB_ID.match(job_id) and os.path.isdir(JobPaths(self.home, job_id).job_dir):
            return job_id
        found = one_by_prefix(job_id, self._job_names(), "job") if _JOB_ID.match(job_id) else None
        if found is not None:
            return found
        close = close_id(job_id, self._job_names())
        mean = f"did you mean {close!r}? or " if close else ""
        raise JobNotFound(job_id, self.name, f"{mean}see 'ma-submit list' (MALAUNCH_HOME={self.home})")

    def paths(self, job_id: str) -> JobPaths:
        """The folder of the job ``job_id`` names (an id or a unique prefix)."""
        return JobPaths(self.home, self.resolve_id(job_id))

    # -- its status ------------------------------------------------------------------------------------------
    def runner_pid(self, paths: JobPaths, state: Mapping[str, Any]) -> Optional[int]:
        """The job's live runner, if any (reaping it first when it is this process's own child)."""
        proc = self.setup.runners.get(paths.job_id)
        if proc is not None:
            proc.poll()  # reap our own child so it does not linger as a zombie
        return runner_pid(paths, state)

    def status_of(self, paths: JobPaths, reading: Optional[StateReading] = None) -> JobStatus:
        """The job's status from its folder (``reading``: its state, when already read)."""
        reading = read_state(paths.state_file) if reading is None else reading
        runner = self.runner_pid(paths, reading.data or {})
        status = job_status(
            paths, reading, backend=self.name, runner_pid=runner, is_ours=lambda pid: still_ours(pid, paths.job_id)
        )
        if status.state is JobState.FAILED:
            status = status._replace(failure_class=_failure_class(paths, status.state, reading.data or {}))
        if status.started_at is not None:
            from .progress import job_progress

            progress, recovery = job_progress(paths, len(status.hosts))
            status = status._replace(progress=progress, recovery=recovery)
        if status.is_terminal and runner is not None:
            self._let_runner_exit(paths, runner)
        reason = pending_reason(status, paths)
        if status.state is JobState.PENDING and runner is None and queued(self.home):
            reason = queue_reason(self.home, paths.job_id) or reason
        return status._replace(pending_reason=reason) if reason else status

    def _let_runner_exit(self, paths: JobPaths, runner: int) -> None:
        """The runner records the end, then exits: give it a moment, so an ended job has nothing left running."""
        deadline = time.monotonic() + _EXEC_SETTLE
        while is_job_process(runner, paths.job_id) and time.monotonic() < deadline:
            self.runner_pid(paths, {})  # reaps it when it is our own child
            time.sleep(0.01)

    def status(self, job_id: str) -> JobStatus:
        take_over(self.home, self.setup.environ)
        return self.status_of(self.paths(job_id))

    def unknown_for_good(self, paths: JobPaths, status: JobStatus) -> bool:
        """Whether ``status`` is UNKNOWN for good: the state file cannot be read and the runner, the one process
        that writes it while the job runs, is gone (its pid file names no process of the job's), so nothing will
        write it again. A damaged file that a live runner (or one not started yet) may still write over is
        waited for, for :data:`~malaunch.sdk.backends.base.UNKNOWN_PATIENCE` seconds."""
        if status.state is not JobState.UNKNOWN:
            return False
        runner = self.runner_pid(paths, {})
        return runner is not None and not still_ours(runner, paths.job_id)

    def wait(self, job_id: str, timeout: Optional[float], pace: Pace) -> JobStatus:
        """:meth:`JobHandle.wait <malaunch.sdk.backends.base.JobHandle.wait>` for a local job: the status is read
        again as soon as the state file changes (the runner records every change of the job there, the end
        first), and at least every ``poll_interval`` seconds (a runner gone before recording the end: the hosts'
        exits are read from their processes); a state file that cannot be read and that no runner will write
        again ends the wait at once."""
        from ..filewatch import ChangeWatch  # only a waiter needs it

        paths = self.paths(job_id)
        poll_interval, clock = pace.poll_interval, pace.clock
        deadline = None if timeout is None else clock() + timeout
        watch = UnknownWatch(clock=clock)
        with ChangeWatch([paths.state_file], poll=poll_interval, sleep=pace.sleep) as changes:
            while True:
                status = self.status(job_id)
                if status.is_terminal:
                    return status
                if watch.gave_up(status) or self.unknown_for_good(paths, status):
                    raise JobStateUnknown(job_id, status.message)
                left = poll_interval
                if deadline is not None:
                    left = min(left, deadline - clock())
                    if left <= 0:
                        raise WaitTimeout(job_id, float(timeout or 0), status.state.value)
                changes.wait(left)

    # -- its output --------------------------------------------------------------------------------------------
    def logs(self, job_id: str, *, follow: bool = False) -> Iterator[str]:
        paths = self.paths(job_id)
        reading = read_state(paths.state_file)
        count = len(reading.data["hosts"]) if reading.data is not None else 0
        if not count:
            hosts = request_json(paths).get("hosts")
            count = len(hosts) if isinstance(hosts, list) else 1
        files = [(i, paths.console_log(i)) for i in range(count)]
        if not follow:
            return _while_reading(paths, itertools.chain(merged_lines(files), _cut_short(paths, count)))
        return _while_reading(paths, self._follow(paths, files))

    def _follow(self, paths: JobPaths, files: List[Tuple[int, str]]) -> Iterator[str]:
        watch = UnknownWatch()

        def ended() -> bool:
            status = self.status_of(paths)
            return status.is_terminal or watch.gave_up(status) or self.unknown_for_good(paths, status)

        from ..filewatch import ChangeWatch  # only a follower needs these
        with ChangeWatch([path for _, path in files] + [paths.state_file]) as changes:
            yield from follow_files(files, ended, watch=changes)
        status = self.status_of(paths)
        if not status.is_terminal:
            raise JobStateUnknown(paths.job_id, status.message)
        yield from _cut_short(paths, len(files))

    # -- inside it ---------------------------------------------------------------------------------------------
    def events(self, job_id: str) -> List[JobEvent]:
        from .events import local_events

        return local_events(self.paths(job_id))

    def follow_events(self, job_id: str, *, poll: float) -> Iterator[JobEvent]:
        """The job's events as :meth:`JobHandle.events <malaunch.sdk.backends.base.JobHandle.events>` follows them,
        read again as soon as a file they come from changes (:func:`.events.event_files`), and at least every
        ``poll`` seconds; a state file that cannot be read and that no runner will write again ends it at once."""
        from ..events import follow_events
        from ..filewatch import ChangeWatch
        from .events import event_files, local_events

        paths = self.paths(job_id)
        watch = UnknownWatch()

        def ended() -> bool:
            status = self.status(job_id)
            if watch.gave_up(status) or self.unknown_for_good(paths, status):
                raise JobStateUnknown(job_id, status.message)
            return status.is_terminal

        with ChangeWatch(event_files(paths), poll=poll) as changes:

            def until_a_change(seconds: float) -> None:
                changes.wait(seconds)

            yield from follow_events(lambda: local_events(paths), ended, poll=poll, sleep=until_a_change)

    def usage(self, job_id: str) -> UsageReport:
        from .inside import local_usage

        return local_usage(self.status(job_id))

    def exec(self, job_id: str, command: Sequence[str], *, host: int, tty: bool, capture: bool,
             stdin: Optional[bytes]) -> ExecResult:  # fmt: skip
        from .inside import local_exec

        paths = self.paths(job_id)
        return local_exec(paths, self.status_of(paths), command, host=host, environ=self.setup.environ,
                          python=self.setup.python, capture=capture, stdin=stdin, tty=tty)  # fmt: skip

    # -- every job -------------------------------------------------------------------------------------------
    def checkpoints(self, job_id: str) -> CheckpointListing:
        """The job's checkpoint folder, read as its shim reads it (:mod:`.checkpoints`)."""
        from .checkpoints import listing

        paths = self.paths(job_id)
        return listing(self.setup.home, paths.job_id, not self.status_of(paths).is_terminal)

    def resume_check(self, ref: ResumeRef) -> ResumeRef:
        """``ref`` with the whole id of the ended local job it names, its checkpoint proven complete."""
        from .checkpoints import resume_source

        paths = self.paths(ref.job_id)
        status = self.status_of(paths)
        return resume_source(self.setup.home, ref._replace(job_id=paths.job_id, location=None),
                             None if status.is_terminal else status.state.value)  # fmt: skip

    def check_home(self) -> None:
        """A home that cannot hold jobs (a file, or a path under one) is an error, not an empty list; one that does
        not exist yet holds no jobs."""
        path = self.home
        while True:
            try:
                info = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                if os.path.dirname(path) == path:
                    return
                path = os.path.dirname(path)
                continue
            except OSError as exc:
                raise ConfigError(f"the jobs' home cannot be read ({exc.strerror})", self.home,
                                  "set MALAUNCH_HOME to a folder of yours") from None  # fmt: skip
            if stat.S_ISDIR(info.st_mode):
                return
            where = "is a file" if path == self.home else f"is under the file {path}"
            raise ConfigError(f"the jobs' home {where}, not a folder", self.home, "set MALAUNCH_HOME to a folder")

    def read_for_history(self, name: str) -> Tuple[JobStatus, Optional[float]]:
        """Job ``name``'s status and ``keep_for``, as the history index asks them."""
        paths = JobPaths(self.home, name)
        reading = read_state(paths.state_file)
        keep_for = reading.data.get("keep_for") if reading.data is not None else None
        return self.status_of(paths, reading), keep_for

    def list(self) -> List[JobStatus]:
        """Every job, newest first, from the history index as ``ma-submit list`` reads it (:meth:`list_page`): an
        ended job with a row is not read again. Nothing is removed (``keep_for`` is applied by the commands)."""
        self.check_home()
        take_over(self.home, self.setup.environ)
        history = History(self.home)
        snap = history.snapshot(self.read_for_history)
        page = snap.page(ListQuery(limit=0), time.time())
        history.settle(snap)
        return list(page.statuses)

    def list_page(self, query: ListQuery, *, now: float) -> ListPage:
        """From the history index (:mod:`.history`): only jobs without a row are read; ``keep_for`` applied."""
        self.check_home()
        take_over(self.home, self.setup.environ)
        history = History(self.home)
        snap = history.snapshot(self.read_for_history)
        page = snap.page(query, now, gone=expire_due(self.home, snap, now))
        history.settle(snap)
        return page._replace(notes=tuple(snap.notes))


def still_ours(pid: int, job_id: str) -> bool:
    """Whether live ``pid`` is the job's, looking again for up to :data:`_EXEC_SETTLE` s before saying no (the
    state is never declared lost because a process was read in the middle of its exec)."""
    deadline = time.monotonic() + _EXEC_SETTLE
    while True:
        if is_job_process(pid, job_id):
            return True
        if not pid_alive(pid) or time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def _while_reading(paths: JobPaths, lines: Iterator[str]) -> Iterator[str]:
    """``lines``, holding the job's use lock while they are read (prune and delete leave the job alone)."""
    with reading(paths):
        yield from lines


def _cut_short(paths: JobPaths, count: int) -> Iterator[str]:
    """After the consoles: what the rank logs kept beyond them, when the job's disk was full (the console copy
    and the logs share it, and the console may lose the race for the last free bytes)."""
    reading = read_state(paths.state_file)
    if reading.data is None or not reading.data.get("disk_full"):
        return
    for index in range(count):
        rank_logs = (read_json(paths.report_file(index)) or {}).get("rank_logs")
        if isinstance(rank_logs, dict):
            logs = {int(rank): path for rank, path in rank_logs.items()
                    if str(rank).isdigit() and isinstance(path, str)}  # fmt: skip
            yield from missing_lines(index, paths.console_log(index), logs)


def _failure_class(paths: JobPaths, job_state: JobState, state: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """A failed job's class, from the first failing host's shim report (else its exit code and console log)."""
    first = state.get("first_failure")
    if job_state is not JobState.FAILED or not isinstance(first, dict):
        return None
    code = first.get("exit_code")
    host = first.get("host")
    if not isinstance(code, int):
        return None
    from ...failures import failure_from_report  # only a failed job's status classifies its failure

    if not isinstance(host, int):
        return failure_from_report(None, code)
    return failure_from_report(read_json(paths.report_file(host)), code, paths.console_log(host))
