"""The events a run's loop absorbs, one class each (slotted classes, not dataclasses: defining a dataclass costs
start-up time). A worker's death seen by the watch is :class:`.procs.watch.WorkerDeath`."""


from __future__ import annotations

from typing import Callable, Optional, Protocol, Union

from .procs.watch import WorkerDeath

__all__ = ["AttemptLink", "Event", "HostsEnd", "LauncherLine", "ProcExit", "ShimSignal", "WorkerDeath"]


class ProcExit:
    """A process the shim started ended (its Popen return code)."""

    __slots__ = ("at", "code", "index")

    def __init__(self, index: int, code: int, at: float) -> None:
        self.index, self.code, self.at = index, code, at


class LauncherLine:
    """A launcher said which of its workers failed (msrun: "Worker process <pid> exit with exception...")."""

    __slots__ = ("at", "code", "index", "pid")

    def __init__(self, index: int, pid: int, code: int, at: float) -> None:
        self.index, self.pid, self.code, self.at = index, pid, code, at


class ShimSignal:
    """The shim itself received a signal."""

    __slots__ = ("signum",)

    def __init__(self, signum: int) -> None:
        self.signum = signum


class HostsEnd:
    """The job's coordinator ends this host's attempt: another host failed or was lost (``line`` says which), or
    every host's ranks are silent or ended (``hung``: the attempt ends as hung where ranks still run)."""

    __slots__ = ("hung", "line")

    def __init__(self, line: str, hung: bool = False) -> None:
        self.line, self.hung = line, hung


Event = Union[ProcExit, LauncherLine, ShimSignal, WorkerDeath, HostsEnd]


class AttemptLink(Protocol):
    """What a run tells the other hosts, and how they reach it (:class:`.hosts.link.HostLink` for one attempt)."""

    def attach(self, post: Optional[Callable[[Event], None]]) -> None:
        """Where the coordinator's ``end`` goes while the run lasts (None once it is over)."""

    def failing(self, hold: float = 0.0) -> None:
        """This host's run is ending after a failure of its own: the other hosts end theirs too, at once, or
        after ``hold`` seconds when its stop is held for a peer to die by itself (its log says a peer failed);
        said again with no hold when that hold ends early."""

    def silent(self, silent: bool, ended: bool = False) -> None:
        """This host's ranks went silent (True) or spoke again (False), or all exited while its launcher winds
        down (``ended``): the coordinator decides on a hang."""
