"""The worker watch: a launcher's own workers, their time of death and exit status, as they happen.

Only the direct children of a launcher the shim started (torchrun, msrun) that carry a rank in their
environment (``MS_NODE_ID``, else ``RANK_ID``/``RANK``; msrun's scheduler, ``MS_ROLE=MS_SCHED``, is not a
worker) are watched. Their own children (a helper ``subprocess.run``, a data-loader worker) never are: a
helper that exits non-zero is not a rank failure. A child whose environment cannot be read (a zombie shows none:
a worker that died within a scan of its birth) is known by the record it wrote as it was born, when the plan has
a birth folder (msrun's, :mod:`.births`): keyed by its pid and start time, naming the launcher (pid and start
time) as its parent. The same records give the rank of a pid the launcher names that the watch never saw
(:meth:`WorkerWatch.born_rank`).

Each worker found gets a pidfd; the thread polls them, so the time of death is known to a few milliseconds
for every worker, and the exit status is read from the zombie right then, before the launcher reaps it
(torchrun reaps at its 0.1 s monitor interval, msrun at its 1 s poll). If the launcher reaped it first, the
status comes from the pidfd itself (``PIDFD_GET_INFO``, Linux 6.15+); only on older kernels does it then stay
unknown (None), and the launcher's own summary supplies it. Without pidfds (Linux < 5.3) the
watch falls back to looking for zombies at every scan.

For a launcher that restarts its workers itself (torchrun's ``--max_restarts``), the watch also keeps each of its
attempts' times (:class:`Round`, wall clock): when the first worker of it was seen, when the first of its workers
failed (a death by SIGTERM, SIGINT or SIGHUP is the launcher stopping the rest, not a failure) and when the last
one died; ``on_round`` is told at each change (the time to recover of
:mod:`..recovery`).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set

from . import births as birth_records
from . import proctree

__all__ = ["Round", "WorkerDeath", "WorkerWatch"]

SCAN_INTERVAL = 0.05
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


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


class Round(NamedTuple):
    """One attempt of a launcher that restarts its workers itself (its own count, ``TORCHELASTIC_RESTART_COUNT``),
    as the watch saw it: wall-clock times (seconds since the epoch), None for what has not happened."""

    attempt: int
    seen: float  # its first worker found (the watch scans every SCAN_INTERVAL)
    failed: Optional[float] = None  # its first worker that exited non-zero (or unknown)
    gone: Optional[float] = None  # its last worker seen to die so far


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
    :attr:`..launcher.Launcher.workers_lead_groups`). ``births``: the plan's birth folder, whose records give a
    child's rank when its environment is gone; ``launcher_starts`` (launcher pid -> start time) proves a record's
    parent."""

    def __init__(
        self,
        token_var: str,
        token: str,
        launchers: Mapping[int, int],
        post: Callable[[WorkerDeath], None],
        attempt_variables: Sequence[str] = (),
        leaders_only: bool = False,
        on_round: Optional[Callable[[List[Round]], None]] = None,
        births: Optional[str] = None,
        launcher_starts: Optional[Mapping[int, int]] = None,
    ):
        self._token = (token_var, token)
        self._births = births  # the plan's birth folder (None: none)
        self._launcher_starts = dict(launcher_starts or {})  # launcher pid -> its start time (a record's parent)
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
        self._on_round = on_round
        self._rounds: Dict[int, Round] = {}  # launcher attempt -> its times (kept only with on_round)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watch", daemon=True)

    def start(self) -> None:
        """Start the watch thread; first remove the birth records no launcher of this watch wrote (an earlier
        attempt's: :func:`.births.prune`)."""
        if self._births is not None:
            birth_records.prune(self._births, dict(self._launcher_starts))
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

    def rounds(self) -> List[Round]:
        """Every launcher attempt seen, oldest first (empty without ``on_round``)."""
        return [self._rounds[number] for number in sorted(self._rounds)]

    def _round_changed(self, attempt: Optional[int], seen: bool = False, code: Optional[int] = 0) -> None:
        """Watch thread: a worker of launcher attempt ``attempt`` was found (``seen``) or died with ``code``."""
        if self._on_round is None or attempt is None:
            return
        now = time.time()
        known = self._rounds.get(attempt)
        if seen:
            if known is not None:
                return
            self._rounds[attempt] = Round(attempt, now)
        else:
            known = known if known is not None else Round(attempt, now)
            stopped = code is not None and -code in _STOP_SIGNALS  # the launcher stopping the rest: not a failure
            failed = known.failed if known.failed is not None or code == 0 or stopped else now
            self._rounds[attempt] = known._replace(failed=failed, gone=now)
        self._on_round(self.rounds())

    def _died(self, worker: _Worker, at: float) -> None:
        if worker.pid in self._done:
            return
        self._done.add(worker.pid)
        code = proctree.zombie_returncode(worker.pid)
        if code is None and worker.fd is not None:  # the launcher reaped it first: the pidfd still knows
            code = proctree.pidfd_exit_status(worker.fd)
        self._post(worker.death(code, at))
        self._round_changed(worker.attempt, code=code)

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
                    self._round_changed(worker.attempt, code=code)
                elif proctree.read_info(worker.pid) is None:
                    self._done.add(worker.pid)
                    self._post(worker.death(None, now))
                    self._round_changed(worker.attempt, code=None)

    def _born(self, pid: int, info: proctree.ProcInfo) -> Optional[bytes]:
        """The variables the launcher's child ``pid`` (``info``: as the scan read it) recorded at its birth, when its
        record names this very process (pid, start time) and its parent (the launcher, pid and start time)."""
        if self._births is None:
            return None
        birth = birth_records.read_birth(self._births, pid, info.start)
        if birth is None or birth.ppid != info.ppid or self._launcher_starts.get(birth.ppid) != birth.pstart:
            return None
        return birth.environ

    def born_rank(self, pid: int) -> Optional[int]:
        """The rank a worker numbered ``pid`` recorded at its birth, for a pid the launcher names that the watch may
        never have seen (reaped between two scans): the one record of that pid whose parent is one of the launchers
        (pid and start time); None when there is none, or more than one (the number given twice)."""
        if self._births is None:
            return None
        found = [birth for birth in birth_records.births_of(self._births, pid)
                 if self._launcher_starts.get(birth.ppid) == birth.pstart]  # fmt: skip
        return _rank_of(found[0].environ) if len(found) == 1 else None

    def _scan(self) -> None:
        for pid in proctree.all_pids():
            if pid in self._workers or pid in self._others:
                continue
            info = proctree.read_info(pid)
            if info is None or info.ppid not in self._launchers:
                continue
            fd = proctree.pidfd_open(pid)  # first: from here on the pid cannot name another process unnoticed
            environ = proctree.read_environ(pid)
            proven = environ is not None and proctree.env_has(environ, *self._token)
            if not environ:  # exited (a zombie shows no environment): what it recorded as it was born
                environ = self._born(pid, info)
                proven = environ is not None
            rank = _rank_of(environ) if environ and proven else None
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
            self._round_changed(attempt, seen=True)

