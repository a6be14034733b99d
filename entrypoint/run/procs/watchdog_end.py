"""The watchdog's second stage: it ends the job's processes once the shim died without saying "done".

:mod:`.watchdog` (the first stage, which listens while the shim runs) becomes this program (``exec``) when its
pipe ends without ``done``, and hands it everything the shim announced: ``FD`` is a descriptor that holds those
lines (the first stage's module docstring lists them) and then ends. ``TOKEN`` and ``GRACE`` are the first stage's.

Every announced group, every announced process that is still the same process (pid and start time), every
member of an announced cgroup and every process carrying ``MALAUNCH_SHIM_TOKEN=TOKEN`` get SIGTERM, then SIGKILL
after the grace (``GRACE``, or the last ``grace`` line); a member of an announced group is waited for and killed
like the others, even one with no token, outside every cgroup, that ignores SIGTERM. Then the cgroups are removed,
and with them every empty job cgroup whose owner is proven gone (``_cgroup.sweep_strays``: a shim that died with
its watchdog left it).
A ``done`` among the lines (a shim that said it and died before it closed the pipe) ends this program at once.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import List, Sequence, Set, Tuple

from . import proctree
from .cgroup import kill_members, members, remove, sweep_strays
from .watchdog import name_self

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


def _read_told(read_fd: int, told: _Told) -> bool:
    """Take every announcement ``read_fd`` holds (whole, to its end: the first stage wrote them before the exec);
    True if one of them is "done"."""
    with os.fdopen(read_fd, "rb") as said:
        for line in said:
            words = line.split()
            if words == [b"done"]:
                return True
            told.hear(words)
    return False


def main(argv: Sequence[str]) -> int:
    """End the job (see the module docstring); returns the exit status."""
    read_fd, token, told = int(argv[0]), argv[1], _Told(float(argv[2]))
    for name in _IGNORED:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    name_self(b"malaunch-wdog")  # the exec named it after the interpreter
    if _read_told(read_fd, told):
        return 0
    _end_the_job(token, told)
    return 0


def _group_members(groups: List[int]) -> List[proctree.ProcKey]:
    """Live processes (never a zombie, never this one) in the process groups ``groups``, by pid and start time."""
    if not groups:
        return []
    me, wanted = os.getpid(), set(groups)
    return [
        proctree.ProcKey(pid, info.start)
        for pid, info in proctree.snapshot().items()
        if info.pgid in wanted and pid != me and not info.zombie
    ]


def _end_the_job(token: str, told: _Told) -> None:
    """The shim is gone: SIGTERM every process of the job, SIGKILL after ``grace``; empty and remove the cgroups."""
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

    # the groups' members as the SIGTERM reaches them are waited for by pid and start time, like the cgroups'
    # below: one without token or cgroup that ignores SIGTERM still gets SIGKILL, and a process that takes a
    # group's number later (once it emptied) is never one of them
    procs.update(_group_members(groups))
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
