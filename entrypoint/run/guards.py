"""What keeps a run's processes from outliving it: the subreaper, the job's cgroup, the watchdog program, and
the shim's own signal handlers (installed for the run, restored after).

Order matters for start-up time: the ranks start first (:meth:`JobGuards.before_start` only notes the shim's
own children and makes the cgroup); :meth:`JobGuards.after_start` then sets the subreaper (it loads ctypes),
starts the watchdog (an interpreter of its own) and moves the processes into the cgroup (the kernel's first
move into a new cgroup takes ~10 ms). No rank can have started, forked and left an orphan in between that the
token does not find anyway.
"""


from __future__ import annotations

import os
import signal
import threading
from typing import Any, Callable, Dict, Iterable, Optional, Set

from . import proctree, selfproc
from ._cgroup import JobCgroup
from ._reaper import JobTree, Watchdog, start_watchdog
from .peers import PEER_RESTART_SIGNAL

__all__ = ["HANDLED_SIGNALS", "JobGuards"]

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, PEER_RESTART_SIGNAL)
_WATCHDOG_GRACE_CAP = 2.0


class JobGuards:
    """The subreaper, cgroup, watchdog and signal handlers of one run."""

    def __init__(self, tree: JobTree, grace: float, base_env: Dict[str, str]) -> None:
        self.tree, self.grace, self.base_env = tree, grace, base_env
        self.cgroup: Optional[JobCgroup] = None
        self.watchdog = Watchdog(None, None)
        self._subreaper: Optional[int] = None
        self._previous: Dict[int, Any] = {}

    def handle_signals(self, handler: Callable[[int, Any], None]) -> None:
        """Route the stop signals (and a peer's restart signal) to ``handler`` (main thread only, else not)."""
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, handler) for sig in HANDLED_SIGNALS}

    def before_start(self) -> None:
        """Note the shim's children from before the run (never part of it) and make the job's cgroup."""
        self.tree.foreign.update(_children_before())
        self.cgroup = JobCgroup.create(f"malaunch-{self.tree.token}")
        if self.cgroup is not None:
            self.tree.cgroup = self.cgroup.path

    def after_start(self, pids: Iterable[int]) -> None:
        """Right after the first processes started: subreaper, watchdog, cgroup moves, announcements."""
        pids = list(pids)
        self._subreaper = selfproc.set_subreaper()
        self._start_watchdog()
        if self.cgroup is not None:
            for pid in pids:
                self.cgroup.add(pid)
            for key in self.tree.find():  # what a rank forked before its move (a daemon) joins it too
                self.cgroup.add(key.pid)
        self.watchdog.announce_groups(pids)

    def adopt(self, pid: int) -> None:
        """A process started later (a relaunch): into the cgroup, its group announced to the watchdog."""
        if self.cgroup is not None:
            self.cgroup.add(pid)
        self.watchdog.announce_groups([pid])

    def _start_watchdog(self) -> None:
        """Start the watchdog program and tell it the job's cgroup; the watchdog is never part of the job."""
        grace = min(self.grace, _WATCHDOG_GRACE_CAP)
        self.watchdog = start_watchdog(self.tree.token, grace, dict(self.base_env))
        if self.watchdog.pid > 0:
            self.tree.foreign.add(self.watchdog.pid)
        if self.cgroup is not None:
            self.watchdog.announce_cgroup(self.cgroup.path)

    def kill_cgroup(self) -> list[int]:
        """SIGKILL whatever is left in the job's cgroup; the pids that survived."""
        return self.cgroup.kill() if self.cgroup is not None else []

    def release(self) -> None:
        """The run is over: the watchdog ends, the handlers and the subreaper flag are restored."""
        self.watchdog.finish()
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        selfproc.restore_subreaper(self._subreaper)


def _children_before() -> Set[int]:
    """The shim's children from before the run; no ``/proc`` scan when it has none."""
    if not proctree.has_children():
        return set()
    me = os.getpid()
    return {info.pid for info in proctree.descendants(me) if info.ppid == me}
