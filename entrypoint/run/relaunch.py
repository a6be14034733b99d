"""Relaunching one failed process alone while the others run on (a launcher's :meth:`~.launcher.Launcher.relaunch`
hook: MindSpore recovery).

When a process fails before the job is ending and its launcher relaunches processes, its pipes are read to
their end first (its last lines are evidence), then the launcher decides: a :class:`~.launcher.Relaunch` with a
spec starts that spec after its delay, as a new process of the run; anything else ends the job as usual. A
relaunched process's facts decide nothing any more, what it left in its process group is killed, and its
failure is kept as an attempt of its own (``RunResult.launcher_attempts``).
"""


from __future__ import annotations

import os.path
import signal
import time
from typing import Callable, List, Optional, Tuple

from ..contract.errors import LaunchError
from ..plan.launch_plan import ProcessSpec
from ..report.report import LauncherAttempt
from ..report.rootcause import Death
from .launcher import Launcher
from .output import Output
from .procs.guards import JobGuards
from .procs.processes import ProcessGroup
from .procs.reaper import JobTree
from .verdict import RunFacts

__all__ = ["Relauncher"]

_SETTLE = 1.0  # a failed process's pipes get this long to be read to the end before its relaunch is decided


class Relauncher:
    """The relaunches of one run: those made (:attr:`relaunched`) and those due (:attr:`pending`)."""

    def __init__(
        self,
        launcher: Launcher,
        group: ProcessGroup,
        output: Output,
        facts: RunFacts,
        tree: JobTree,
        guards: JobGuards,
    ) -> None:
        self.launcher, self.group, self.output, self.facts = launcher, group, output, facts
        self.tree, self.guards = tree, guards
        self.relaunched: List[LauncherAttempt] = []
        self.pending: List[Tuple[float, ProcessSpec]] = []  # relaunches due at a monotonic time

    def consider(self, fact: Death, stopping: bool) -> bool:
        """Process ``fact.index`` failed: True when the launcher starts it again (after its delay)."""
        if not self.launcher.relaunches:
            return False
        self.output.settle(fact.index, _SETTLE)  # its last lines are in its log before it is judged
        spec = self.group.specs[fact.index]
        failure = self.facts.failure_of(fact)
        decision = self.launcher.relaunch(spec, failure, len(self.relaunched), stopping)
        for line in decision.says if decision is not None else ():
            self.output.say(line)
        if decision is None or decision.spec is None:
            return False
        now = time.monotonic()
        took = now - self.group.started[fact.index]
        folder = os.path.dirname(spec.log_file)
        self.relaunched.append(LauncherAttempt(len(self.relaunched), failure, took, folder, restarted=True))
        self.facts.dropped.add(fact.index)
        # what it left in its group: its leader is reaped (its exit is this fact), so one process of the run at a time
        self.tree.signal_groups([self.group.leaders[fact.index]], signal.SIGKILL)
        self.pending.append((now + decision.delay, decision.spec))
        return True

    def start_due(self, now: float, on_error: Callable[[LaunchError], None]) -> None:
        """Start every relaunch that is due; a failed start goes to ``on_error`` (the job ends)."""
        for item in [item for item in self.pending if item[0] <= now]:
            self.pending.remove(item)
            error: Optional[LaunchError]
            try:
                index = self.output.add(item[1])
            except LaunchError as failed:
                error = failed
            else:
                error = self.group.start(item[1])
            if error is not None:
                on_error(error)
                return
            self.guards.adopt(self.group.leaders[index])
            self.group.watch_exit(index)
            self.output.attach_one(index, self.group.procs[index])
