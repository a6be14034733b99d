"""What keeps a run's processes from outliving it: the subreaper, the job's cgroup, the watchdog program, and
the shim's own signal handlers (installed for the run, restored after).

Order matters for start-up time: the ranks start first (:meth:`JobGuards.before_start` only notes the shim's
own children and makes the cgroup, or waits for the shim's move into the one made early, see
:class:`.cgroup.CgroupEntry`); :meth:`JobGuards.after_start` then moves the shim back out of the cgroup,
starts the watchdog (an interpreter of its own, born outside), sets the subreaper (it loads ctypes) and moves
into the cgroup what was not born inside (the kernel's first move into a new cgroup takes ~8 ms).
"""


from __future__ import annotations

import os
import signal
import threading
from typing import Any, Callable, Dict, Iterable, Optional, Set

from . import proctree, selfproc
from .cgroup import CgroupEntry, JobCgroup, cgroup_name, sweep_strays
from .reaper import JobTree, Watchdog, new_token, start_watchdog

__all__ = ["HANDLED_SIGNALS", "JobGuards", "enter_cgroup_early"]

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_WATCHDOG_GRACE_CAP = 2.0
_REMOVE_PATIENCE = 2.0


def enter_cgroup_early() -> Optional[CgroupEntry]:
    """Make a job cgroup now and start moving the shim into it (the run that starts the ranks takes it)."""
    return CgroupEntry.begin(cgroup_name(new_token()))


class JobGuards:
    """The subreaper, cgroup, watchdog and signal handlers of one run."""

    def __init__(
        self, tree: JobTree, grace: float, base_env: Dict[str, str], entry: Optional[CgroupEntry] = None
    ) -> None:
        self.tree, self.grace, self.base_env = tree, grace, base_env
        self.cgroup: Optional[JobCgroup] = None
        self._entry = entry
        self._inside = False  # the shim itself is in the job's cgroup (from the entry until after_start)
        self.watchdog = Watchdog(None, None)
        self._subreaper: Optional[int] = None
        self._previous: Dict[int, Any] = {}

    def handle_signals(self, handler: Callable[[int, Any], None]) -> None:
        """Route the stop signals to ``handler`` (main thread only, else not)."""
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, handler) for sig in HANDLED_SIGNALS}

    def before_start(self) -> None:
        """Note the shim's children from before the run (never part of it) and make the job's cgroup (or wait
        until the shim is inside the one made early: what it starts next is born inside)."""
        self.tree.foreign.update(_children_before())
        if self._entry is not None:
            self.cgroup = self._entry.cgroup
            self._inside = self._entry.wait()
        else:
            self.cgroup = JobCgroup.create(cgroup_name(self.tree.token))
        if self.cgroup is not None:
            self.tree.cgroup = self.cgroup.path

    def after_start(self, pids: Iterable[int]) -> None:
        """Right after the first processes started: the shim leaves the cgroup; watchdog, subreaper, cgroup moves
        (of what was not born inside), announcements.

        Processes started while the shim was inside were born inside, and so is everything they fork: they are
        neither moved again nor searched for (a scan of every process's ``/proc`` files while the ranks start
        up, and a write to ``cgroup.procs`` per rank, each of which can wait for the kernel)."""
        pids = list(pids)
        born_inside = self._inside
        self._leave()
        self._start_watchdog()
        self._subreaper = selfproc.set_subreaper()
        if self.cgroup is not None and not born_inside:
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

    def _leave(self) -> None:
        """The shim leaves the job's cgroup (its processes stay); where the kernel refuses, the cgroup is given up
        (the shim must never be among what a cgroup kill ends) and the token and descendants find the job."""
        if not self._inside:
            return
        self._inside = False
        if self.cgroup is not None and not self.cgroup.leave():
            self.cgroup, self.tree.cgroup = None, None

    def _remove_cgroup(self, reap: Callable[[], object]) -> None:
        """Remove the job's cgroup. A process killed at the end may still be exiting, then a zombie of the shim
        (the subreaper) that keeps the cgroup busy though it is no member any more: reaped until the cgroup can
        go, for at most ``_REMOVE_PATIENCE`` s (never while a member is left: that one survived SIGKILL)."""
        reap()
        if self.cgroup is not None:
            self.cgroup.remove(_REMOVE_PATIENCE, reap)

    def kill_cgroup(self) -> list[int]:
        """SIGKILL whatever is left in the job's cgroup; the pids that survived."""
        self._leave()
        return self.cgroup.kill() if self.cgroup is not None else []

    def release(self, reap: Callable[[], object]) -> None:
        """The run is over: the cgroup is removed, the watchdog ends, the handlers and the subreaper flag are
        restored. ``reap`` reaps the shim's zombie children that nobody else waits for."""
        self._leave()
        self._remove_cgroup(reap)
        sweep_strays()  # what shims that died before their watchdog ran left behind
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
