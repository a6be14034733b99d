"""The worker watch: a launcher's own workers, their time of death and exit status, as they happen.

Only the direct children of a launcher the shim started (torchrun, msrun) that carry a rank in their
environment (``MS_NODE_ID``, else ``RANK_ID``/``RANK``; msrun's scheduler, ``MS_ROLE=MS_SCHED``, is not a
worker) are watched. Their own children (a helper ``subprocess.run``, a data-loader worker) never are: a
helper that exits non-zero is not a rank failure.

Each worker found gets a pidfd; the thread polls them, so the time of death is known to a few milliseconds
for every worker, and the exit status is read from the zombie right then, before the launcher reaps it
(torchrun reaps at its 0.1 s monitor interval, msrun at its 1 s poll). If the launcher reaped it first, the
status comes from the pidfd itself (``PIDFD_GET_INFO``, Linux 6.15+); only on older kernels does it then stay
unknown (None), and the launcher's own summary supplies it. Without pidfds (Linux < 5.3) the
watch falls back to looking for zombies at every scan.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from typing import Callable, Dict, Mapping, Optional, Sequence, Set

from . import proctree

__all__ = ["WorkerDeath", "WorkerWatch"]

SCAN_INTERVAL = 0.05


class WorkerDeath:
    """Event: a launcher's worker ended (``code`` Popen-style, None when it could not be read).

    A slotted class, not a dataclass: events cost nothing to define at start-up.
    """

    __slots__ = ("at", "attempt", "code", "error_file", "index", "pid", "rank")

    def __init__(
        self,
        index: int,  # the plan process (launcher) it belonged to
        rank: int,
        pid: int,
        code: Optional[int],
        at: float,  # time.monotonic() of death, as observed
        attempt: Optional[int] = None,  # the launcher's attempt (TORCHELASTIC_RESTART_COUNT in its environment)
        error_file: Optional[str] = None,  # its TORCHELASTIC_ERROR_FILE, when it had one
    ) -> None:
        self.index, self.rank, self.pid, self.code, self.at = index, rank, pid, code, at
        self.attempt, self.error_file = attempt, error_file

    def __repr__(self) -> str:
        return (f"WorkerDeath(index={self.index}, rank={self.rank}, pid={self.pid}, code={self.code}, at={self.at}, "
                f"attempt={self.attempt}, error_file={self.error_file!r})")  # fmt: skip


class _Worker:
    __slots__ = ("attempt", "error_file", "fd", "index", "pid", "rank")

    def __init__(
        self,
        index: int,
        rank: int,
        pid: int,
        fd: Optional[int],
        attempt: Optional[int] = None,
        error_file: Optional[str] = None,
    ) -> None:
        self.index, self.rank, self.pid, self.fd = index, rank, pid, fd
        self.attempt, self.error_file = attempt, error_file

    def death(self, code: Optional[int], at: float) -> WorkerDeath:
        return WorkerDeath(self.index, self.rank, self.pid, code, at, self.attempt, self.error_file)


def _int_value(environ: bytes, name: str) -> Optional[int]:
    raw = proctree.env_value(environ, name)
    return int(raw) if raw is not None and raw.strip().isdigit() else None


def _launcher_attempt(environ: bytes, names: Sequence[str]) -> Optional[int]:
    """The launcher's own attempt of a worker: the first of ``names`` (the launcher's ``attempt_variables``) that
    its environment has."""
    for name in names:
        if proctree.env_value(environ, name) is not None:
            return _int_value(environ, name)
    return None


def _rank_of(environ: bytes) -> Optional[int]:
    raw = proctree.env_value(environ, "MS_NODE_ID")
    if raw is None and proctree.env_value(environ, "MS_ROLE") != b"MS_SCHED":
        raw = proctree.env_value(environ, "RANK_ID") or proctree.env_value(environ, "RANK")
    if raw is None or not raw.strip().isdigit():
        return None
    return int(raw)


class WorkerWatch:
    """Finds and watches the workers of the launchers ``launchers`` (pid -> plan index) in a thread; a worker's
    launcher attempt is read from the first of ``attempt_variables`` its environment has. With
    ``leaders_only`` a child of a launcher is a worker only when it leads its process group (see
    :attr:`..launcher.Launcher.workers_lead_groups`)."""

    def __init__(
        self,
        token_var: str,
        token: str,
        launchers: Mapping[int, int],
        post: Callable[[WorkerDeath], None],
        attempt_variables: Sequence[str] = (),
        leaders_only: bool = False,
    ):
        self._token = (token_var, token)
        self._attempt_variables = tuple(attempt_variables)
        self._leaders_only = leaders_only
        self._launchers = dict(launchers)
        self._post = post
        self._workers: Dict[int, _Worker] = {}
        self._done: Set[int] = set()
        self._others: Set[int] = set()  # launcher children that are not workers (msrun's scheduler)
        self.pid_ranks: Dict[int, int] = {}
        self.error_files: Dict[str, int] = {}  # every TORCHELASTIC_ERROR_FILE seen -> its worker's rank
        self.attempt_ranks: Dict[Optional[int], Set[int]] = {}  # launcher attempt -> ranks of the workers seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watch", daemon=True)

    def start(self) -> None:
        """Start the watch thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (one last look first) and release the pidfds."""
        self._stop.set()
        self._thread.join(5.0)
        for worker in self._workers.values():
            if worker.fd is not None:
                with contextlib.suppress(OSError):
                    os.close(worker.fd)
                worker.fd = None

    def running(self) -> bool:
        """True before the first worker is seen and while one seen has not exited (counts: any thread may ask)."""
        seen = len(self._workers)
        return seen == 0 or len(self._done) < seen

    def _run(self) -> None:
        while True:
            self._scan()
            fds = {w.fd: w for w in self._workers.values() if w.fd is not None and w.pid not in self._done}
            stopping = self._stop.is_set()
            if fds:
                poller = select.poll()
                for fd in fds:
                    poller.register(fd, select.POLLIN)
                for fd, _ in poller.poll(0 if stopping else SCAN_INTERVAL * 1000):
                    self._died(fds[fd], time.monotonic())
            if stopping:  # one last look: a death not reported yet (the job may end right after its last worker)
                self._check_zombies()
                return
            if not fds:
                self._stop.wait(SCAN_INTERVAL)
            self._check_zombies()

    def _died(self, worker: _Worker, at: float) -> None:
        if worker.pid in self._done:
            return
        self._done.add(worker.pid)
        code = proctree.zombie_returncode(worker.pid)
        if code is None and worker.fd is not None:  # the launcher reaped it first: the pidfd still knows
            code = proctree.pidfd_exit_status(worker.fd)
        self._post(worker.death(code, at))

    def _check_zombies(self) -> None:
        now = time.monotonic()
        for worker in list(self._workers.values()):
            if worker.pid in self._done:
                continue
            if worker.fd is None:
                code = proctree.zombie_returncode(worker.pid)
                if code is not None:
                    self._done.add(worker.pid)
                    self._post(worker.death(code, now))
                elif proctree.read_info(worker.pid) is None:
                    self._done.add(worker.pid)
                    self._post(worker.death(None, now))

    def _scan(self) -> None:
        for pid in proctree.all_pids():
            if pid in self._workers or pid in self._others:
                continue
            info = proctree.read_info(pid)
            if info is None or info.ppid not in self._launchers:
                continue
            fd = proctree.pidfd_open(pid)  # first: from here on the pid cannot name another process unnoticed
            environ = proctree.read_environ(pid)
            rank = _rank_of(environ) if environ and proctree.env_has(environ, *self._token) else None
            again = proctree.read_info(pid)
            helper = again is not None and self._leaders_only and again.pgid != pid  # or a worker before setsid
            if rank is None or again is None or again.start != info.start or helper:
                if environ and proctree.env_value(environ, "MS_ROLE") == b"MS_SCHED":
                    self._others.add(pid)
                if fd is not None:
                    os.close(fd)
                continue  # not (yet) a worker: forked but not exec'd shows the launcher's environment
            raw_path = proctree.env_value(environ, "TORCHELASTIC_ERROR_FILE") if environ else None
            path = os.fsdecode(raw_path) if raw_path else None
            attempt = _launcher_attempt(environ, self._attempt_variables) if environ else None
            self._workers[pid] = _Worker(self._launchers[info.ppid], rank, pid, fd, attempt, path)
            self.pid_ranks[pid] = rank
            self.attempt_ranks.setdefault(attempt, set()).add(rank)
            if path:
                self.error_files[path] = rank

