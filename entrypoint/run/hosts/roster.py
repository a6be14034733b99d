"""The job's hosts as the coordinator's book knows them: who is here, who is lost, who still prepares. Pure.

:class:`Roster` is the hosts' part of :class:`~.jobstate.JobState`: each host here with its connection and
address, each host lost (and not back) with its cause, each host's log folder as its hello said, the hosts here
whose prepare steps are not done (rule 6 of :mod:`.jobstate`) and the latest attempt a joining host says it ran.
It counts the hosts that may start an attempt (:meth:`Roster.ready`, :meth:`Roster.enough`) and names a host by
its address (:meth:`Roster.addr`); what the job does about them is the book's.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

from .messages import Cause

__all__ = ["EXIT_HOST_LOST", "Roster", "lost_cause"]

#: The shim's exit code when a lost host did not come back (retryable: the platform's job restart takes over).
EXIT_HOST_LOST = 75


def lost_cause(host: int, addr: str, why: str, accept: bool, log: str = "") -> Cause:
    """The cause naming a lost host (class ``host_lost``, retryable); ``log``: its log folder, as its hello said.
    Its own exit code is not known here: ``code`` is the one the job exits with for a lost host."""
    line = f"ma-entrypoint: host {host} ({addr}) lost: {why}"
    return Cause(host=host, addr=addr, rank=None, code=EXIT_HOST_LOST, signal=None, kind="host_lost",
                 retryable=True, accept=accept, peer=False, ended=False, line=line, tail=(line,),
                 log=log)  # fmt: skip


class Roster:
    """The hosts of one job: here, lost, preparing (see the module's docstring)."""

    __slots__ = ("here", "logs", "lost", "preparing", "seen")

    def __init__(self) -> None:
        self.here: Dict[int, Tuple[object, str]] = {}  # host -> (its connection, its address)
        self.lost: Dict[int, Cause] = {}  # hosts lost and not back, with their cause
        self.logs: Dict[int, str] = {}  # host -> its log folder, as its hello said
        self.preparing: Set[int] = set()  # hosts here whose prepare steps are not done
        self.seen = -1  # the latest attempt a joining host says it ran

    def join(self, host: int, conn: object, addr: str, last: int, log: str, prepared: bool) -> None:
        """Host ``host`` is here on ``conn`` (no longer lost); ``last``: the last attempt it ran (-1: none)."""
        self.here[host] = (conn, addr)
        if log:
            self.logs[host] = log
        self.lost.pop(host, None)
        (self.preparing.discard if prepared else self.preparing.add)(host)
        self.seen = max(self.seen, last)

    def leave(self, host: int, why: str, accept: bool) -> Cause:
        """Host ``host`` (here) is lost: its cause (``accept``: ``restart_on`` accepts a lost host)."""
        addr = self.here.pop(host)[1]
        self.preparing.discard(host)
        cause = self.lost[host] = lost_cause(host, addr, why, accept, self.logs.get(host, ""))
        return cause

    def conn(self, host: int) -> Optional[object]:
        """The connection host ``host`` is here on; None: it is not here."""
        entry = self.here.get(host)
        return entry[0] if entry is not None else None

    def addr(self, host: Optional[int]) -> str:
        """The address of ``host``: as it was lost, else as it joined; ``?`` when not known."""
        if host is None:
            return "?"
        if host in self.lost:
            return self.lost[host].addr
        return self.here.get(host, (None, "?"))[1]

    def ready(self) -> int:
        """How many hosts are here and prepared."""
        return len(self.here) - len(self.preparing)

    def ready_hosts(self) -> Tuple[int, ...]:
        """The hosts here and prepared, in order: the members of an attempt that starts now."""
        return tuple(sorted(self.here.keys() - self.preparing))

    def enough(self, least: Optional[int]) -> bool:
        """Elastic: the hosts here may start an attempt (at least ``least`` ready, the master among them);
        ``least`` None (not elastic): never."""
        return least is not None and 0 in self.here and 0 not in self.preparing and self.ready() >= least

    def missing(self, num_hosts: int) -> List[int]:
        """The job's hosts that are not here, in order."""
        return [host for host in range(num_hosts) if host not in self.here]
