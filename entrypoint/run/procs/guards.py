"""What keeps a run's processes from outliving it: the subreaper, the job's cgroup, the watchdog program, and
the shim's own signal handlers (installed for the run, restored after).

Order matters for start-up time. Before it imports the run phase (the entry script, ``__main__.py``; a caller of
``main()`` begins them before planning), the shim starts the watchdog (an interpreter of its own, born outside the
cgroup) and then makes the job's cgroup and starts moving itself in (:class:`EarlyGuards`): the watchdog boots on
the core the shim's single-threaded imports and planning leave idle, not beside the ranks, the kernel's wait to move
the shim into the new cgroup passes meanwhile, and the watchdog is running before the first rank starts, so a shim
SIGKILLed at any moment after that leaves nothing (the watchdog knows the job's token and cgroup from the start; its
pipe keeps what was announced, so one still booting when the shim dies reads it all, then the end of the pipe, and
ends the job). The ranks start first after planning (:meth:`JobGuards.before_start` only notes the shim's own
children, tells the watchdog the run's grace and waits for the shim's move into the cgroup, see
:class:`.cgroup.CgroupEntry`); :meth:`JobGuards.after_start` then moves the shim back out of the cgroup, sets the
subreaper (it loads ctypes) and moves into the cgroup what was not born inside (the kernel's first move into a new
cgroup takes ~8 ms). A later attempt starts its own watchdog there, after its ranks.

On a machine whose cores the ranks keep busy, the watchdog still acts within its grace when the shim dies: it
keeps the shim's scheduling priority (nothing lowers it, and an unprivileged process could not raise it back), so
once the end of its pipe wakes it, it gets its share of a core like any rank. Its second stage (:mod:`.watchdog`:
an ``exec`` into the code that ends the job) needs about 30 ms of CPU to start, so with R ranks busy on each core
its first act, SIGTERM to the announced groups, comes some (R + 1) x 30 ms after the shim's death (a quarter of a
second for 8 ranks a core), and its SIGKILL after the grace it was told.
"""


from __future__ import annotations

import os
import signal
import threading
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Set

from ...contract.variables import without_secret
from . import proctree, selfproc
from .cgroup import CgroupEntry, JobCgroup, cgroup_name, sweep_strays
from .proctree import ProcKey
from .reaper import JobTree, Watchdog, new_token, start_watchdog

__all__ = ["HANDLED_SIGNALS", "EarlyGuards", "JobGuards"]

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_WATCHDOG_GRACE_CAP = 2.0
_REMOVE_PATIENCE = 2.0


class EarlyGuards:
    """What the run phase sets up before it plans, for its first run (see the module docstring): the job's token,
    its watchdog (started first: born outside the cgroup) and its cgroup entry, None where no cgroup can be made.

    :meth:`take` hands them to the run that starts the ranks (once); :meth:`abandon` undoes what no run took."""

    def __init__(self, token: str, watchdog: Watchdog, entry: Optional[CgroupEntry]) -> None:
        self.token, self.watchdog, self.entry = token, watchdog, entry
        self._taken = False

    @classmethod
    def begin(cls, environ: Mapping[str, str]) -> EarlyGuards:
        """Start the watchdog (with the shim's ``environ`` less the job's secret and the token, and the longest
        grace until the run says its own), then make the job's cgroup, tell the watchdog, and start moving this
        process in."""
        token = new_token()
        watchdog = start_watchdog(token, _WATCHDOG_GRACE_CAP, dict(without_secret(environ)))
        entry = CgroupEntry.begin(cgroup_name(token))
        if entry is not None:
            watchdog.announce_cgroup(entry.cgroup.path)
        return cls(token, watchdog, entry)

    def take(self) -> Optional[EarlyGuards]:
        """These guards the first time (the first run owns them from then on), None after."""
        if self._taken:
            return None
        self._taken = True
        return self

    def abandon(self) -> None:
        """The run phase is over: the cgroup goes where no run started in it (:meth:`.CgroupEntry.abandon`), and
        the watchdog is told "done" unless the run that took it did so already."""
        self._taken = True
        if self.entry is not None:
            self.entry.abandon()
        self.watchdog.finish()


class JobGuards:
    """The subreaper, cgroup, watchdog and signal handlers of one run."""

    def __init__(
        self, tree: JobTree, grace: float, base_env: Dict[str, str], early: Optional[EarlyGuards] = None
    ) -> None:
        """``early``: the guards set up before planning (its token is ``tree``'s), else each is set up here."""
        self.tree, self.grace, self.base_env = tree, grace, base_env
        self.cgroup: Optional[JobCgroup] = None
        self._entry = early.entry if early is not None else None
        self._inside = False  # the shim itself is in the job's cgroup (from the entry until after_start)
        self.watchdog = early.watchdog if early is not None else Watchdog(None, None)
        self._early = early is not None
        self._subreaper: Optional[int] = None
        self._previous: Dict[int, Any] = {}

    def handle_signals(self, handler: Callable[[int, Any], None]) -> None:
        """Route the stop signals to ``handler`` (main thread only, else not)."""
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, handler) for sig in HANDLED_SIGNALS}

    def before_start(self) -> None:
        """Note the shim's children from before the run (never part of it; the watchdog started early among
        them), tell that watchdog the run's grace, and make the job's cgroup (or wait until the shim is inside
        the one made early: what it starts next is born inside)."""
        self.tree.foreign.update(_children_before())
        if self._early:
            self._watch_the_watchdog()
        if self._entry is not None:
            self.cgroup = self._entry.cgroup
            self._inside = self._entry.wait()
        else:
            self.cgroup = JobCgroup.create(cgroup_name(self.tree.token))
        if self.cgroup is not None:
            self.tree.cgroup = self.cgroup.path

    def after_start(self, leaders: Iterable[ProcKey]) -> None:
        """Right after the first processes started: the shim leaves the cgroup; watchdog, subreaper, cgroup moves
        (of what was not born inside), announcements.

        Processes started while the shim was inside were born inside, and so is everything they fork: they are
        neither moved again nor searched for (a scan of every process's ``/proc`` files while the ranks start
        up, and a write to ``cgroup.procs`` per rank, each of which can wait for the kernel). ``leaders``: the
        processes started, by pid and start time (:attr:`.processes.ProcessGroup.leaders`)."""
        leaders = list(leaders)
        born_inside = self._inside
        self._leave()
        if not self._early:
            self._start_watchdog()
        self._subreaper = selfproc.set_subreaper()
        if self.cgroup is not None and not born_inside:
            for leader in leaders:
                self.cgroup.add(leader.pid)
            for key in self.tree.find():  # what a rank forked before its move (a daemon) joins it too
                self.cgroup.add(key.pid)
        self.watchdog.announce_groups(leaders)

    def adopt(self, leader: ProcKey) -> None:
        """A process started later (a relaunch): into the cgroup, its group announced to the watchdog."""
        if self.cgroup is not None:
            self.cgroup.add(leader.pid)
        self.watchdog.announce_groups([leader])

    def _start_watchdog(self) -> None:
        """Start the watchdog program and tell it the job's cgroup; the watchdog is never part of the job."""
        grace = min(self.grace, _WATCHDOG_GRACE_CAP)
        self.watchdog = start_watchdog(self.tree.token, grace, dict(self.base_env))
        if self.watchdog.pid > 0:
            self.tree.foreign.add(self.watchdog.pid)
        if self.cgroup is not None:
            self.watchdog.announce_cgroup(self.cgroup.path)

    def _watch_the_watchdog(self) -> None:
        """The watchdog started before planning: never part of the job, and told the run's grace (it knows the
        cgroup made early already)."""
        if self.watchdog.pid > 0:
            self.tree.foreign.add(self.watchdog.pid)
        self.watchdog.announce_grace(min(self.grace, _WATCHDOG_GRACE_CAP))

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
    """The shim's children from before the run: none without a look, else the kernel's list of them (its
    watchdog is one, usually the only one), else from a scan of every process's ``/proc`` stat."""
    if not proctree.has_children():
        return set()
    listed = proctree.listed_children()
    if listed is not None:
        return listed
    me = os.getpid()
    return {info.pid for info in proctree.descendants(me) if info.ppid == me}
