"""The ending of a run: who gets which signal when, from the first failure (or stop signal) to the last SIGKILL.

The first failure starts the ending: the stop signal (SIGTERM, or the signal the shim received) goes to every
process of the job except the launchers; ``grace`` seconds later everything left gets SIGKILL. An ending that
starts with a failure whose log says a peer failed holds the stop up to :data:`..report.rootcause.PEER_WINDOW`
(never beyond the grace; a failure without such evidence, or a signal, ends the hold), so the peer that really
failed dies by itself; a launcher that would stop its other workers itself on seeing a death (torchrun) is paused
(SIGSTOP) as long, unless its gate judges its restarts (``restart_on``). msrun is not paused: its SIGKILL of the
peers after its line is collateral anyway. A launcher (torchrun, msrun) gets SIGKILL (by pid) right as the stop
goes out when its workers' exit statuses are all known (``statuses_known``); otherwise it is left to say what it
knows and killed once it has (``summary_written``), or :data:`LAUNCHER_SETTLE` s after its last worker is gone. A
killed launcher's exit is no fact (:attr:`Ending.ended_launchers`).
"""


from __future__ import annotations

import os
import signal
import time
from typing import Callable, Optional, Set

from ..report.rootcause import PEER_WINDOW
from .procs import proctree
from .procs.processes import ProcessGroup
from .procs.reaper import JobTree

__all__ = ["LAUNCHER_SETTLE", "Ending"]

LAUNCHER_SETTLE = 5.0  # a launcher whose workers are gone gets this long to write its summary and exit


class Ending:
    """The teardown state of one run, driven by the run's loop (:meth:`begin`, :meth:`tick`, :meth:`kill_now`)."""

    def __init__(
        self,
        tree: JobTree,
        group: ProcessGroup,
        grace: float,
        launchers: bool,
        statuses_known: Callable[[], bool],
        summary_written: Callable[[], bool],
    ) -> None:
        self.tree, self.group, self.grace, self.launchers = tree, group, grace, launchers
        self.statuses_known, self.summary_written = statuses_known, summary_written
        self.at: Optional[float] = None  # when it started
        self.stopped_at: Optional[float] = None  # when the stop signal first went out (after any hold)
        self.stop_sig = signal.SIGTERM
        self.killed_at: Optional[float] = None
        self.hold_until: Optional[float] = None  # the stop held after a failure that names a peer's
        self.paused = False  # the launchers are (or may be, by their gate) stopped during the hold
        self.resume = False  # the hold is over: a launcher its gate paused on a later death is resumed each look
        self.settle_at: Optional[float] = None
        self.ended_launchers: Set[int] = set()  # indices of the launchers the shim killed during the ending
        self.signalled: Set[proctree.ProcKey] = set()

    def begin(self, hold: bool = False, pause_launchers: bool = False) -> None:
        """The job ends: stop every process now, or with ``hold`` (the failure says a peer failed) up to
        :data:`PEER_WINDOW` s later, the launchers paused meanwhile with ``pause_launchers`` (so that they do not
        stop the other workers themselves); a second call during the hold stops everything now (the supervisor
        makes none for another death whose log names a peer's failure: the hold goes on)."""
        if self.at is None:
            self.at = time.monotonic()
            if hold:
                self.hold_until = self.at + min(PEER_WINDOW, self.grace)
                if pause_launchers and self.launchers:  # (the gate may have paused them already, as it saw it)
                    self.paused = True
                    self._signal_launchers(signal.SIGSTOP)
                return
            self.stop_all()
        elif self.hold_until is not None:
            self.stop_all()

    def open(self) -> bool:
        """No stop has gone out: the ending has not begun, or is held (a death's words may still decide)."""
        return self.at is None or self.hold_until is not None

    def held_for(self) -> float:
        """How long the stop is held from now (0: it is not)."""
        return max(0.0, self.hold_until - time.monotonic()) if self.hold_until is not None else 0.0

    def _signal_launchers(self, sig: int) -> None:
        """``sig`` to each launcher still provably our unreaped child."""
        for index, proc in enumerate(self.group.procs):
            if index in self.group.returncodes:
                continue
            info = proctree.read_info(proc.pid)
            if info is not None and info.ppid == os.getpid() and not info.zombie and proc.returncode is None:
                proctree.signal_proven(proctree.ProcKey(proc.pid, info.start), sig)

    def stop_all(self) -> None:
        """The stop signal to every process not signalled yet; the launchers go at once when their workers'
        statuses are known (its teardown, tens of ms to die, overlaps the workers')."""
        self.hold_until = None
        if self.paused:
            self.paused = False
            self._signal_launchers(signal.SIGCONT)
        self.resume = True
        if self.stopped_at is None:
            self.stopped_at = time.monotonic()
        self.stop_workers(self.stop_sig)
        if self.statuses_known():
            self.end_launchers()

    def stop_workers(self, sig: int) -> None:
        """``sig`` to every process of the job not signalled yet, except the launchers themselves."""
        fresh = [key for key in self.tree.find(launchers=not self.launchers) if key not in self.signalled]
        self.tree.signal(fresh, sig)
        self.signalled.update(fresh)
        if not self.launchers:
            self.tree.signal_groups(self.group.live_groups(), sig)

    def kill_now(self) -> None:
        """A second signal to the shim: no more grace."""
        if self.killed_at is None:
            self.killed_at = time.monotonic()
        self.tree.signal(self.tree.find(launchers=not self.launchers), signal.SIGKILL)

    def tick(self, now: float) -> None:
        """One look during the ending: newcomers get the stop signal, everything SIGKILL after the grace, and
        the launchers are let go once their workers are gone."""
        if self.at is None:
            return
        if self.hold_until is not None:
            if now < self.hold_until and self.killed_at is None:
                return
            self.stop_all()
        elif self.resume and self.launchers and not self.ended_launchers:
            self._signal_launchers(signal.SIGCONT)  # harmless to a running one
        if self.killed_at is None and now >= self.at + self.grace:
            self.killed_at = now
        left = self.tree.find(launchers=not self.launchers)
        if self.killed_at is not None:
            self.tree.signal(left, signal.SIGKILL)
        else:  # newcomers get the stop signal too
            self.tree.signal([key for key in left if key not in self.signalled], self.stop_sig)
            self.signalled.update(left)
        if self.launchers and self.settle_at is None and not left:
            self.settle_at = now + LAUNCHER_SETTLE
        if self.settle_at is not None and self.summary_written():
            self.settle_at = now  # the launcher has said everything: no need to wait for it to wind down
        if self.settle_at is not None and now >= self.settle_at:
            self.end_launchers(groups=True)

    def end_launchers(self, groups: bool = False) -> None:
        """SIGKILL the launchers still running (with ``groups``, their process groups too: once their workers
        are gone); their exits are not facts."""
        for index, proc in enumerate(self.group.procs):
            if index in self.group.returncodes:
                continue
            self.ended_launchers.add(index)
            if groups:
                self.tree.signal_groups([self.group.leaders[index]], signal.SIGKILL)
                continue
            # Not its group (a worker left in the launcher's group must die of the stop signal, not of SIGKILL),
            # and only while it is provably still our unreaped child (the waiter may reap it at any moment).
            info = proctree.read_info(proc.pid)
            if info is not None and info.ppid == os.getpid() and not info.zombie and proc.returncode is None:
                proctree.signal_proven(proctree.ProcKey(proc.pid, info.start), signal.SIGKILL)

    def grace_left(self) -> float:
        """What is left of the grace period for the final teardown."""
        if self.killed_at is not None:
            return 0.0
        if self.at is not None:
            return max(0.0, self.at + self.grace - time.monotonic())
        return self.grace
