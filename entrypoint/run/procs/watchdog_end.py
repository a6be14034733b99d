"""The watchdog's second stage: it ends the job's processes once the shim died without saying "done".

:mod:`.watchdog` (the first stage, which listens while the shim runs) becomes this program (``exec``) when its
pipe ends without ``done``, and hands it everything the shim announced: ``FD`` is a descriptor that holds those
lines (the first stage's module docstring lists them) and then ends. ``TOKEN`` and ``GRACE`` are the first stage's.

Every announced group while it is proven the job's, every announced process that is still the same process (pid
and start time), every member of an announced cgroup and every process carrying ``MALAUNCH_SHIM_TOKEN=TOKEN`` get
SIGTERM, then SIGKILL after the grace (``GRACE``, or the last ``grace`` line). A group is signalled by its number
only while its leader is the process announced (``pg PGID START``: pid and start time, alive or a zombie), at the
SIGTERM and again at the SIGKILL; the members of the announced groups proven at the first look (once the shim's
death is seen: :func:`.pgroups.members_of`; :mod:`.pgroups` says what the kernel guarantees and what proves a
member of a group whose leader is gone) are waited for and killed by pid and start time like the others, even
one with no token, outside every cgroup, that ignores SIGTERM. A number whose leader is gone, or was given to
another process, is never signalled. Then the cgroups are removed, and with them every empty job cgroup whose
owner is proven gone (``_cgroup.sweep_strays``: a shim that died with its watchdog left it).
A ``done`` among the lines (a shim that said it and died before it closed the pipe) ends this program at once. A
damaged line is read defensively: one of no known form, or whose numbers do not parse, is ignored; a ``pg`` line
without its leader's start time (or with a group number below 2) proves no group; a ``grace`` that is not a
finite number of seconds at or above 0 keeps the grace it had.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import List, Sequence, Set, Tuple

from . import pgroups, proctree
from .cgroup import kill_members, members, remove, sweep_strays
from .watchdog import name_self

__all__ = ["main"]

TOKEN_VAR = "MALAUNCH_SHIM_TOKEN"
_IGNORED = ("SIGINT", "SIGHUP", "SIGTSTP", "SIGTTIN", "SIGTTOU")


class _Told:
    """What the shim announced so far (the module docstring's lines)."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.groups: List[proctree.ProcKey] = []  # the leaders: pid and start time (-1: unknown, proves nothing)
        self.procs: Set[Tuple[int, int]] = set()
        self.cgroups: List[str] = []

    def hear(self, words: List[bytes]) -> None:
        """Take one announcement (its words); a line of no known form, or whose numbers do not parse, is ignored."""
        with contextlib.suppress(ValueError):
            self._hear(words)

    def _hear(self, words: List[bytes]) -> None:
        if len(words) in (2, 3) and words[0] == b"pg" and int(words[1]) > 1:  # 0: this process's own group; 1: init's
            self.groups.append(proctree.ProcKey(int(words[1]), int(words[2]) if len(words) == 3 else -1))
        elif len(words) == 2 and words[0] == b"cg":
            self.cgroups.append(os.fsdecode(words[1]))
        elif len(words) == 3 and words[0] == b"proc":
            self.procs.add((int(words[1]), int(words[2])))
        elif len(words) == 2 and words[0] == b"grace" and 0.0 <= float(words[1]) < float("inf"):  # never NaN
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
    read_fd, token, told = int(argv[0]), argv[1], _Told(float(argv[2]))  # the first stage's, as the shim gave them
    for name in _IGNORED:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    name_self(b"malaunch-wdog")  # the exec named it after the interpreter
    if _read_told(read_fd, told):
        return 0
    _end_the_job(token, told)
    return 0


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
        for leader in groups:  # by number only while its leader is the one announced
            pgroups.signal_led_group(leader, sig)

    # the groups' members proven as the SIGTERM reaches them are waited for by pid and start time, like the
    # cgroups' below: one without token or cgroup that ignores SIGTERM still gets SIGKILL, and a process that takes
    # a group's number later (once it emptied) is never one of them
    procs.update(pgroups.members_of(groups))
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
