"""The job's processes: how the supervisor finds them, ends them, and outlives its own death.

A process belongs to the run when it is *proven* to (see :mod:`.proctree`):

- its environment carries ``MALAUNCH_SHIM_TOKEN=<token>``: every process the shim starts gets it and every
  descendant inherits it, including launcher workers in sessions of their own (pytorch#113231, #110065,
  dlrover#1331: orphaned workers keep holding accelerators); or
- it descends from the shim in the process tree. The shim is the child subreaper while it runs
  (``PR_SET_CHILD_SUBREAPER``), so a daemon that double-forks, calls ``setsid`` and clears its environment
  is reparented to the shim rather than to PID 1, and is found here.

Processes that were the shim's children before the run (and their descendants) and the watchdog are never
part of it. Every signal goes through :func:`.proctree.signal_proven` (pid plus start time, via a pidfd); one to a
whole process group goes through :func:`.pgroups.signal_led_group` (its leader proven the same way).

:class:`JobTree` finds the processes; :func:`start_watchdog` starts the separate watchdog program
(:mod:`.watchdog`), which ends them if the shim is SIGKILLed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from typing import Callable, Dict, Iterable, List, Optional, Set

from . import pgroups, proctree
from .bareboot import bare_argv
from .cgroup import members as _cgroup_members
from .proctree import ProcKey

__all__ = ["TOKEN_VAR", "JobTree", "Watchdog", "new_token", "start_watchdog"]

TOKEN_VAR = "MALAUNCH_SHIM_TOKEN"


def new_token() -> str:
    """A token unique to one run (the pid keeps two shims on one host apart even with a weak RNG)."""
    return f"{os.getpid()}-{os.urandom(12).hex()}"


class JobTree:
    """Finds the run's live processes: token carriers plus the shim's descendants, minus what was there before."""

    def __init__(self, token: str, foreign: Iterable[int]) -> None:
        self.token = token
        self.me = os.getpid()
        self.foreign: Set[int] = set(foreign)  # the shim's children from before the run, and the watchdog
        self.launchers: Set[int] = set()
        self.cgroup: Optional[str] = None  # the job's cgroup directory, when there is one

    def find(self, *, launchers: bool = True) -> List[ProcKey]:
        """Live (non-zombie) processes of the run; without the launchers themselves when ``launchers`` is False."""
        snap = proctree.snapshot()
        skip = {self.me}
        for pid in self.foreign:
            skip.add(pid)
            skip.update(info.pid for info in proctree.descendants(pid, snap))
        found: Dict[int, ProcKey] = {}
        for info in proctree.descendants(self.me, snap):
            if info.pid not in skip and not info.zombie:
                found[info.pid] = ProcKey(info.pid, info.start)
        for pid, info in snap.items():
            if pid in skip or pid in found or info.zombie:
                continue
            environ = proctree.read_environ(pid)
            if environ and proctree.env_has(environ, TOKEN_VAR, self.token):
                found[pid] = ProcKey(pid, info.start)
        if self.cgroup is not None:
            for pid in _cgroup_members(self.cgroup):
                member = snap.get(pid)
                if pid not in skip and member is not None and not member.zombie:
                    found.setdefault(pid, ProcKey(pid, member.start))
        if not launchers:
            for pid in self.launchers:
                found.pop(pid, None)
        return sorted(found.values())

    def signal(self, keys: Iterable[ProcKey], sig: int) -> None:
        """Send ``sig`` to each process that is still the one that was found."""
        for key in keys:
            proctree.signal_proven(key, sig)

    def signal_groups(self, leaders: Iterable[ProcKey], sig: int) -> None:
        """Send ``sig`` to the process groups the run started, named by their leaders (pid and the start time read
        while each was the shim's unreaped child). A group is signalled by its number only while its leader is
        still that process (:func:`.pgroups.signal_led_group`); the exit watch reaps a leader as soon as it exits,
        at any moment, and then its number proves nothing: what is left in its group gets ``sig`` one process at a
        time, each a process of the run (:meth:`find`) by pid and start time."""
        gone = {leader.pid for leader in leaders if not pgroups.signal_led_group(leader, sig)}
        if gone:
            self.signal([key for key in self.find() if _group_of(key) in gone], sig)


class Watchdog:
    """The shim's end of the watchdog pipe: announce groups and processes, then say "done"."""

    def __init__(self, proc: Optional[subprocess.Popen[bytes]], write_fd: Optional[int]) -> None:
        self.proc = proc
        self.pid = proc.pid if proc is not None else -1
        self._fd = write_fd
        self._announced: Set[ProcKey] = set()

    def _send(self, message: bytes) -> None:
        if self._fd is None or not message:
            return
        with contextlib.suppress(OSError):  # the watchdog is gone: nothing to tell
            os.write(self._fd, message)

    def announce_groups(self, leaders: Iterable[ProcKey]) -> None:
        """Tell the watchdog which process groups to kill as well, should the shim die: ``pg PGID START``, each
        named by its leader (pid and the start time read as this process started it:
        :attr:`.processes.ProcessGroup.leaders`), which the watchdog proves before it signals the group
        (:mod:`.pgroups`). A leader whose start could not be read (-1) proves nothing and is not announced."""
        self._send(b"".join(b"pg %d %d\n" % (leader.pid, leader.start) for leader in leaders if leader.start >= 0))

    def announce_grace(self, grace: float) -> None:
        """Tell the watchdog the run's grace period (SIGTERM to SIGKILL), should the shim die: a watchdog started
        before planning was given a default."""
        self._send(b"grace %r\n" % grace)

    def announce_cgroup(self, path: str) -> None:
        """Tell the watchdog the job's cgroup, whose members it kills should the shim die."""
        self._send(f"cg {path}\n".encode())

    def announce(self, keys: Iterable[ProcKey]) -> None:
        """Tell the watchdog about processes of the job it could not find by the token."""
        fresh = [key for key in keys if key not in self._announced]
        self._announced.update(fresh)
        self._send(b"".join(b"proc %d %d\n" % (key.pid, key.start) for key in fresh))

    def finish(self) -> None:
        """Normal completion: the watchdog exits without killing anything, and is reaped."""
        if self._fd is None:
            return
        self._send(b"done\n")
        os.close(self._fd)
        self._fd = None
        if self.proc is None:
            return
        try:
            self.proc.wait(5.0)
        except subprocess.TimeoutExpired:  # wedged (should not happen): do not leave it behind
            self.proc.kill()
            self.proc.wait()


def watchdog_argv(read_fd: int, token: str, grace: float) -> List[str]:
    """The watchdog's command line (``python -I -S -c BOOT PACKAGE_DIR FD TOKEN GRACE``: a bare interpreter,
    :mod:`.bareboot`, that imports only :mod:`.watchdog` and what it needs, standard library only; it starts while
    the ranks start, on the same CPUs)."""
    return bare_argv("run.procs.watchdog", [str(read_fd), token, f"{grace:g}"])


def start_watchdog(token: str, grace: float, environ: Dict[str, str]) -> Watchdog:
    """Start the watchdog program (its own session and name; ``environ`` must not carry the token)."""
    read_fd, write_fd = os.pipe()
    os.set_inheritable(write_fd, False)
    env = {key: value for key, value in environ.items() if key != TOKEN_VAR}
    try:
        proc = subprocess.Popen(
            watchdog_argv(read_fd, token, grace),
            pass_fds=(read_fd,),
            env=env,
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # out of the shim's group and session: a signal to those must not reach it
        )
    except OSError:
        os.close(write_fd)
        return Watchdog(None, None)
    finally:
        os.close(read_fd)
    return Watchdog(proc, write_fd)


def wait_gone(tree: JobTree, seconds: float) -> bool:
    """Wait up to ``seconds`` for the run to have no live process; True when none is left."""
    deadline = time.monotonic() + seconds
    while tree.find():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def kill_everything(
    tree: JobTree, groups: List[ProcKey], grace: float, wait: Optional[Callable[[float], bool]] = None
) -> List[int]:
    """SIGTERM the groups (named by their leaders: :meth:`JobTree.signal_groups`) and every process of the run,
    SIGKILL after ``grace`` (or once ``wait(seconds)``, the pause between looks, returns True: a second signal to
    the shim); returns survivors' pids."""
    tree.signal_groups(groups, signal.SIGTERM)

    def kill() -> None:
        tree.signal_groups(groups, signal.SIGKILL)

    return proctree.kill_loop(tree.find, grace, wait=wait, on_kill=kill)


def _group_of(key: ProcKey) -> Optional[int]:
    """The process group of ``key`` while it is still that process; else None."""
    info = proctree.read_info(key.pid)
    return info.pgid if info is not None and info.start == key.start else None
