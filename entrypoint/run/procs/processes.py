"""The processes one run started: each with its spec, its Popen, its start time and, once known, its exit.

Every process starts in a session of its own, with ``{**base_env, **defaults, **spec.env}`` (``spec.env_defaults``
only where the environment lacks them) and the job's token. One thread posts the
:class:`~..events.ProcExit` of each (:class:`ExitWatch`: it polls their pidfds, which become readable when a
process ends, and reaps each then); where the kernel has no pidfds (Linux < 5.3), a thread per process waits for
it. Processes are only ever added (a relaunched process is a new one).
"""


from __future__ import annotations

import os
import select
import subprocess
import threading
import time
from typing import Callable, Dict, List, Mapping, Optional, Set, Tuple

from ...contract.errors import LaunchError
from ...plan.launch_plan import ProcessSpec
from ..events import Event, ProcExit
from . import proctree
from .reaper import TOKEN_VAR

__all__ = ["ExitWatch", "ProcessGroup"]


class ExitWatch:
    """One thread that posts the exit of every process it is given (:meth:`add`, its pidfd): it polls the pidfds
    and reaps each process as its pidfd becomes readable. The thread runs while a process is left to wait for, and
    a later :meth:`add` (a relaunch) starts it again."""

    def __init__(self, post: Callable[[Event], None]) -> None:
        self.post = post
        self._lock = threading.Lock()
        self._added: List[Tuple[int, int, subprocess.Popen[bytes]]] = []  # (pidfd, index, process) not yet polled
        self._wake: Optional[Tuple[int, int]] = None  # a pipe that interrupts the poll for what was added
        self.thread: Optional[threading.Thread] = None

    def add(self, index: int, proc: subprocess.Popen[bytes], pidfd: int) -> None:
        """Post process ``index``'s exit; ``pidfd`` is its pidfd, closed once the exit is posted."""
        with self._lock:
            self._added.append((pidfd, index, proc))
            if self._wake is not None:
                os.write(self._wake[1], b"+")
                return
            self._wake = os.pipe()
            self.thread = threading.Thread(target=self._run, args=(self._wake[0],), name="wait", daemon=True)
            self.thread.start()

    def _run(self, wake: int) -> None:
        poller = select.poll()
        poller.register(wake, select.POLLIN)
        waiting: Dict[int, Tuple[int, subprocess.Popen[bytes]]] = {}  # pidfd -> (index, process)
        while True:
            with self._lock:
                for pidfd, index, proc in self._added:
                    waiting[pidfd] = (index, proc)
                    poller.register(pidfd, select.POLLIN)
                self._added.clear()
                if not waiting:  # nothing left to wait for: the next add starts a new thread
                    assert self._wake is not None
                    for fd in self._wake:
                        os.close(fd)
                    self._wake = None
                    return
            for fd, _events in poller.poll():
                if fd == wake:
                    os.read(wake, 4096)
                    continue
                index, proc = waiting.pop(fd)
                poller.unregister(fd)
                os.close(fd)
                code = proc.wait()
                self.post(ProcExit(index, code, time.monotonic()))


class ProcessGroup:
    """The processes of one run, by index (the plan's order, then relaunches)."""

    def __init__(self, base_env: Mapping[str, str], token: str, post: Callable[[Event], None]) -> None:
        self.base_env = base_env
        self.token = token
        self.post = post
        self.specs: List[ProcessSpec] = []
        self.procs: List[subprocess.Popen[bytes]] = []
        self.leaders: List[proctree.ProcKey] = []  # each process named for good: the leader of its group
        self.started: List[float] = []
        self.returncodes: Dict[int, int] = {}
        self.exits = ExitWatch(post)
        self.waiters: List[threading.Thread] = []  # where the kernel has no pidfds: a thread per process

    def start(self, spec: ProcessSpec) -> Optional[LaunchError]:
        """Start ``spec`` (its waiter comes with :meth:`watch_exit`); the error when it cannot be started."""
        defaults = {k: v for k, v in spec.env_defaults.items() if k not in self.base_env and k not in spec.env}
        env = {**self.base_env, **defaults, **spec.env, TOKEN_VAR: self.token}
        try:
            proc = subprocess.Popen(
                list(spec.argv),
                env=env,
                cwd=spec.cwd or None,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                bufsize=0,
            )
        except OSError as error:
            return LaunchError(
                f"cannot start {spec.name}: {spec.argv[0]!r}: {error.strerror}; "
                "check that the program exists, is executable and is on PATH"
            )
        info = proctree.read_info(proc.pid)  # our child, not reaped before watch_exit: the number is still its
        self.specs.append(spec)
        self.procs.append(proc)
        self.leaders.append(proctree.ProcKey(proc.pid, info.start if info is not None else -1))  # -1: never proven
        self.started.append(time.monotonic())
        return None

    def watch_exit(self, index: int) -> None:
        """Have process ``index``'s exit posted (the zombie keeps it until then)."""
        proc = self.procs[index]
        pidfd = proctree.pidfd_open(proc.pid)
        if pidfd is not None:
            self.exits.add(index, proc, pidfd)
            return
        waiter = threading.Thread(target=self._wait, args=(index, proc), name="wait", daemon=True)
        waiter.start()
        self.waiters.append(waiter)

    def _wait(self, index: int, proc: subprocess.Popen[bytes]) -> None:
        code = proc.wait()
        self.post(ProcExit(index, code, time.monotonic()))

    def running(self) -> bool:
        """Whether a process has not been seen to exit yet."""
        return len(self.returncodes) < len(self.procs)

    def pids(self) -> Set[int]:
        """Every pid this run started."""
        return {proc.pid for proc in self.procs}

    def live_groups(self) -> List[proctree.ProcKey]:
        """The process groups of the processes not seen to exit, named by their leaders (pid and start time: the
        exit watch may have reaped one that has not been seen to exit yet)."""
        return [key for index, key in enumerate(self.leaders) if index not in self.returncodes]

    def reap(self, seconds: float) -> List[int]:
        """Wait up to ``seconds`` for each process; the pids still running after that."""
        left = []
        for proc in self.procs:
            try:
                proc.wait(seconds)
            except subprocess.TimeoutExpired:
                left.append(proc.pid)
        return left

    def join(self, seconds: float) -> None:
        """Let the threads that post the exits finish."""
        for waiter in [*self.waiters, *([self.exits.thread] if self.exits.thread is not None else [])]:
            waiter.join(seconds)
