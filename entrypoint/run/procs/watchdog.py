"""The watchdog: a separate program that ends the job's processes if the shim dies without saying "done".

Started by :func:`malaunch.entrypoint.run.procs.reaper.start_watchdog` as
``python -m malaunch.entrypoint.run.procs.watchdog FD TOKEN GRACE`` in a session of its own, without the job's token in
its environment and with a command line of its own (``pkill -f ma-entrypoint`` does not match it, and its
``comm`` is ``malaunch-wdog``). It reads lines from the pipe ``FD``:

- ``pg <pgid>``: a process group the shim started;
- ``cg <path>``: the job's cgroup: its members are ended as well, and it is removed;
- ``grace <seconds>``: the run's grace period, in place of ``GRACE`` (a watchdog started before the shim planned
  had the default);
- ``proc <pid> <start>``: a process of the job (found by the shim as its descendant, e.g. a daemon that left
  its session and cleared its environment, which no token scan can find);
- ``done``: the run ended normally; exit without touching anything.

End of file without ``done`` means the shim is gone: every announced group, every announced process that is
still the same process (pid and start time), and every process carrying ``MALAUNCH_SHIM_TOKEN=TOKEN`` get
SIGTERM, then SIGKILL after ``GRACE`` seconds. Then the cgroups are removed, and with them every empty job cgroup
whose owner is proven gone (``_cgroup.sweep_strays``: a shim that died before its watchdog ran left it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import List, Sequence, Set, Tuple

from . import proctree
from .cgroup import kill_members, members, remove, sweep_strays

__all__ = ["main"]

TOKEN_VAR = "MALAUNCH_SHIM_TOKEN"
_IGNORED = ("SIGINT", "SIGHUP", "SIGTSTP", "SIGTTIN", "SIGTTOU")


class _Told:
    """What the shim announced so far (the module docstring's lines)."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.groups: List[int] = []
        self.procs: Set[Tuple[int, int]] = set()
        self.cgroups: List[str] = []

    def hear(self, words: List[bytes]) -> None:
        """Take one announcement (its words); a line of no known form is ignored."""
        if len(words) == 2 and words[0] == b"pg":
            self.groups.append(int(words[1]))
        elif len(words) == 2 and words[0] == b"cg":
            self.cgroups.append(os.fsdecode(words[1]))
        elif len(words) == 3 and words[0] == b"proc":
            self.procs.add((int(words[1]), int(words[2])))
        elif len(words) == 2 and words[0] == b"grace":
            self.grace = float(words[1])


def _listen(read_fd: int, told: _Told) -> bool:
    """Read announcements until "done" (True) or end of file (False: the shim died)."""
    buffer = b""
    while True:
        try:
            chunk = os.read(read_fd, 65536)
        except InterruptedError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            return False
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            words = line.split()
            if words == [b"done"]:
                return True
            told.hear(words)


def _name_self(name: bytes) -> None:
    """Set this process's ``comm`` (what ``ps`` and ``pkill`` without ``-f`` see), best effort: written to
    ``/proc/self/comm`` (the main thread's name is the process's), so the watchdog loads no ctypes for a
    ``prctl``."""
    with contextlib.suppress(OSError):
        fd = os.open("/proc/self/comm", os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, name[:15])
        finally:
            os.close(fd)


def main(argv: Sequence[str]) -> int:
    """Run the watchdog (see the module docstring); returns its exit status."""
    read_fd, token, told = int(argv[0]), argv[1], _Told(float(argv[2]))
    for name in _IGNORED:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    _name_self(b"malaunch-wdog")
    if _listen(read_fd, told):
        return 0
    _end_the_job(read_fd, token, told)
    return 0


def _end_the_job(read_fd: int, token: str, told: _Told) -> None:
    """The shim is gone: SIGTERM every process of the job, SIGKILL after ``grace``; empty and remove the cgroups."""
    with contextlib.suppress(OSError):
        os.close(read_fd)

    groups, cgroups = told.groups, told.cgroups
    procs = {proctree.ProcKey(pid, start) for pid, start in told.procs}

    def find() -> List[proctree.ProcKey]:
        found = set(proctree.pids_with_env(TOKEN_VAR, token))
        for key in procs:
            info = proctree.read_info(key.pid)
            if info is not None and info.start == key.start and not info.zombie:
                found.add(key)
        return sorted(found)

    def kill_groups(sig: int = signal.SIGKILL) -> None:
        for pgid in groups:
            proctree.signal_group(pgid, sig)

    kill_groups(signal.SIGTERM)

    def kill_cgroups() -> None:
        kill_groups()
        for path in cgroups:
            kill_members(path)

    for path in cgroups:  # members first get SIGTERM like every other process of the job
        for pid in members(path):
            info = proctree.read_info(pid)
            if info is not None:
                procs.add(proctree.ProcKey(pid, info.start))
    proctree.kill_loop(find, told.grace, on_kill=kill_cgroups)
    for path in cgroups:
        kill_members(path)
        remove(path, patience=5.0)  # the job's last zombies are reaped by whoever inherited them
    sweep_strays()  # the shim is dead now: a cgroup of its that is still here (or another dead shim's) goes


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
