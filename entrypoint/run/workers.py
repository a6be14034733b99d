"""A launcher's workers as the run sees them: the watch over them, the gate over its own restarts, and what the
launcher's own output lines say. Present only when the plan's processes are launchers
(``Launcher.starts_workers``); every method of :class:`Workers` is then a no-op or empty without them."""


from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional

from ..plan.launch_plan import LaunchPlan
from .events import Event, LauncherLine
from .launcher import Gate, Launcher
from .output import Output
from .procs.proctree import ProcKey
from .procs.reaper import TOKEN_VAR
from .procs.watch import Round, WorkerDeath, WorkerWatch

__all__ = ["Workers"]


class Workers:
    """The watch and the gate of one run's launchers, and the events they post."""

    def __init__(self, plan: LaunchPlan, launcher: Launcher, output: Output, post: Callable[[Event], None]) -> None:
        self.plan, self.launcher, self.output, self.post = plan, launcher, output, post
        self.watch: Optional[WorkerWatch] = None
        self.gate = Gate()
        #: told every change of a self-restarting launcher's attempts (their times: :class:`.procs.watch.Round`)
        self.on_round: Optional[Callable[[List[Round]], None]] = None

    def start(self, token: str, leaders: List[ProcKey]) -> None:
        """Watch the workers of the launchers ``leaders`` (plan order; each named by the pid and start time read as
        it was started, before its exit was watched: one reaped since is never taken for the process that gets its
        pid); also tells msrun's pids' ranks."""
        if not self.launcher.starts_workers:
            return
        launchers = {key.pid: index for index, key in enumerate(leaders)}
        known = {index: key for index, key in enumerate(leaders) if key.start >= 0}  # -1: gone before it was read
        self.gate = self.launcher.gate(self.plan, known)
        self.watch = WorkerWatch(TOKEN_VAR, token, launchers, self._died, self.launcher.attempt_variables,
                                 self.launcher.workers_lead_groups, self.on_round, self.plan.births,
                                 {key.pid: key.start for key in leaders})  # fmt: skip
        self.watch.start()

    def _died(self, death: WorkerDeath) -> None:
        """Watch thread: after a worker's failure whatever the launcher prints is teardown chatter (a worker that
        exits 0 ends nothing: msrun may still be saying it spawned the job)."""
        if self.plan.watch_workers and death.code != 0:
            self.output.quiet()
        self.gate.hold(death)  # before the event: the launcher must not restart before the loop has judged it
        self.post(death)

    def lines(self, index: int, lines: bytes) -> None:
        """Output thread: the launcher process ``index`` printed ``lines``."""
        says = self.launcher.read_lines(self.plan, lines)
        if says.quiet:
            self.output.quiet()
        for pid, code in says.failures:
            self.post(LauncherLine(index, pid, code, time.monotonic()))

    def rank_of(self, pid: int) -> Optional[int]:
        """The rank of a worker the watch saw, else the one its birth record gives (a pid the launcher names)."""
        if self.watch is None:
            return None
        rank = self.watch.pid_ranks.get(pid)
        return rank if rank is not None else self.watch.born_rank(pid)

    def pid_ranks(self) -> Optional[Dict[int, int]]:
        """Every worker the watch saw (pid -> rank); None without a watch."""
        return dict(self.watch.pid_ranks) if self.watch is not None else None

    def running(self) -> bool:
        """Whether a worker may still run: True without a watch or before the first worker is seen, False once
        every worker seen has exited."""
        return self.watch is None or self.watch.running()

    def error_files(self) -> Dict[str, int]:
        """Every worker error file the watch saw (path -> rank)."""
        return dict(self.watch.error_files) if self.watch is not None else {}

    def stop(self) -> None:
        """Stop watching."""
        if self.watch is not None:
            self.watch.stop()
