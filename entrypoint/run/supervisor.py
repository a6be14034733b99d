"""Execute a :class:`~..plan.launch_plan.LaunchPlan` with its :class:`~.launcher.Launcher`: start all, forward
output, end the job, say why.

:class:`Supervisor` has the shape of torch elastic's ``PContext``: :meth:`~Supervisor.start`, then
:meth:`~Supervisor.poll` until it says the run is over, then :meth:`~Supervisor.close`. It never asks which method
runs; the launcher's hooks say what differs. Its parts, one job each: :class:`~.procs.processes.ProcessGroup` (the
processes), :class:`~.output.Output` (logs and console), :class:`~.ending.Ending` (who gets which signal when),
:class:`~.verdict.RunFacts` (the facts and the root cause), :class:`~.procs.guards.JobGuards` (subreaper, cgroup,
watchdog, signal handlers), and the typed events of :mod:`.events`.

Contract of :func:`run_plan`:

1. The log directory and every log file are created before anything starts; if that fails, ``LaunchError``.
2. All processes start at once, each in a session of its own, with ``{**base_env, **spec.env}`` (plus the
   ``spec.env_defaults`` the environment lacks) and ``MALAUNCH_SHIM_TOKEN``; a program that cannot be started
   tears down the others and raises ``LaunchError``.
3. Output follows ``plan.log_source`` (:mod:`.output`); the console never slows a rank down.
4. Facts are recorded as they come (:mod:`.verdict`): each process's exit, each launcher worker's death
   (:mod:`.procs.watch`), the failures a launcher's lines name, and at the end what the launcher wrote down. The first
   failure starts the *ending* (:mod:`.ending`); a process the launcher relaunches
   (:meth:`~.launcher.Launcher.relaunch`) is started again after its delay instead, the others running on. The
   root cause is then decided from the facts by a pure function.
5. SIGTERM, SIGINT and SIGHUP to the shim end the job the same way; the result is 128+signal. A second signal
   skips the rest of the grace period. In a multi-host job the coordinator (:mod:`.hosts`) is told of this
   run's first failure, and may end the run itself (another host failed or was lost): its root cause is then,
   unless a rank of this host failed first, :func:`~.hosts.peer_ended_failure` (exit code 3). A
   launcher that restarts its workers itself has them judged by its gate (:meth:`~.launcher.Launcher.gate`);
   ``RunResult.launcher_attempts`` has every attempt it made.
6. A watchdog program (its own name and session) ends the job's processes should the shim itself die.
6b. With ``MALAUNCH_HANG_TIMEOUT`` (:mod:`.hang`) every process gets ``MALAUNCH_PROGRESS_FILE``, and the loop looks
   at the ranks' signs of life every half second: a silent host ends the run as hung (several hosts: the
   coordinator decides, and ends every host's run; a host whose ranks all exited is not hung with it); the hang
   report (:mod:`.hang_report`, its py-spy dumps bounded to 15 s) is made before the ending starts, while the
   ranks are still where they hung.
7. On return every output is drained, no process of the job is left (token carriers, and everything that was
   reparented to the shim as subreaper: daemons included), and every child has been reaped.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import sys
import time
from typing import TYPE_CHECKING, BinaryIO, Callable, List, Mapping, Optional, Sequence, Set, Tuple

from ..contract.errors import LaunchError
from ..plan.launch_plan import LaunchPlan
from ..report.report import Failure, RunResult
from ..report.rootcause import Death, teardown_signals
from .beacon import ProgressBeacon
from .ending import Ending
from .events import AttemptLink, Event, HostsEnd, LauncherLine, ProcExit, ShimSignal, WorkerDeath
from .hang import (
    PROGRESS_NAME,
    PROGRESS_VAR,
    Silence,
    hang_line,
    hang_verdict,
    make_progress_file,
    rank_pids,
    rank_sinks,
)
from .launcher import Launcher
from .output import Output, prepare_folders
from .output.pump import tune_malloc
from .procs import proctree
from .procs.guards import EarlyGuards, JobGuards
from .procs.processes import ProcessGroup
from .procs.reaper import TOKEN_VAR, JobTree, kill_everything, new_token
from .relaunch import Relauncher
from .verdict import RunFacts
from .workers import Workers

if TYPE_CHECKING:  # loaded only when a run is found hung
    from .hang_report import Hung
    from .procs.watch import Round

__all__ = ["TOKEN_VAR", "Failure", "RunResult", "Supervisor", "run_plan"]

_TICK = 0.02
_SETTLE = 0.25  # a failed process's pipes get this long to be read to their end before its log is evidence
_ANNOUNCE_EVERY = 0.5
_STOP_SIGNALS = teardown_signals(False, False)  # deaths a stop signal caused: collateral, never evidence


class Supervisor:
    """One run of a plan: start / poll / close, method-agnostic (the launcher's hooks say what differs)."""

    def __init__(self, plan: LaunchPlan, launcher: Launcher, base_env: Mapping[str, str], out: BinaryIO,
                 err: BinaryIO, early: Optional[EarlyGuards] = None, link: Optional[AttemptLink] = None) -> None:
        self.plan, self.launcher = plan, launcher
        self.events: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self.output = Output(plan, out, err, launcher)
        self.workers = Workers(plan, launcher, self.output, self.events.put)
        self.output.on_launcher_lines = self.workers.lines
        self.tree = JobTree(early.token if early is not None else new_token(), ())
        self.group = ProcessGroup(base_env, self.tree.token, self.events.put)
        self.facts = RunFacts(plan, launcher, self.group, self.output)
        self.ending = Ending(self.tree, self.group, plan.grace_period, launcher.starts_workers,
                             lambda: self.facts.statuses_known(self.workers.watch),
                             lambda: launcher.summary_written(self.output.sinks[0].text()))  # fmt: skip
        self.guards = JobGuards(self.tree, plan.grace_period, dict(base_env), early)
        self.shim_signal: Optional[int] = None
        self.link = link  # the other hosts (multi-host jobs): told when this run fails, they may end it
        self.hosts_end: Optional[str] = None  # the coordinator ended this run: why (another host failed, lost)
        self.silence: Optional[Silence] = None  # hang detection (MALAUNCH_HANG_TIMEOUT): the ranks' last signs
        self.hung: Optional[Hung] = None  # the run ended as hung: its root cause and report
        self.relauncher = Relauncher(launcher, self.group, self.output, self.facts, self.tree, self.guards)
        self.error: Optional[LaunchError] = None
        self.started_wall = time.time()
        self._finished = False
        self._announce_at = time.monotonic() + _ANNOUNCE_EVERY  # no /proc scan while the ranks start up
        self._tick_at = 0.0

    # -- start --------------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start every process, then what can wait: guards, the exit watch, output threads, the worker watch."""
        self.started_wall = time.time()
        self.guards.before_start()
        for spec in self.plan.processes:
            self.error = self.group.start(spec)
            if self.error is not None:
                break
        if self.launcher.starts_workers:
            self.tree.launchers = self.group.pids()
        self.guards.after_start(self.group.leaders)
        tune_malloc()  # once the ranks started: what they wait for comes first
        for index in range(len(self.group.procs)):
            self.group.watch_exit(index)
        self.output.attach(self.group.procs, lambda: None)
        self.workers.start(self.tree.token, self.group.leaders)
        if self.error is not None:
            self.begin_ending()

    def _on_signal(self, signum: int, frame: object) -> None:
        self.events.put(ShimSignal(signum))  # SimpleQueue.put is reentrant: safe in a signal handler

    # -- events ---------------------------------------------------------------------------------------------------
    def absorb(self, event: Event) -> None:
        """Record the fact an event carries; a failure (or a signal) starts the ending."""
        if isinstance(event, (ShimSignal, HostsEnd)):
            self._signalled(event)
            return
        failed, fact = False, None
        own: Tuple[str, ...] = ()
        if isinstance(event, ProcExit):
            self.group.returncodes[event.index] = event.code
            if event.index in self.ending.ended_launchers:
                return  # the shim killed it during the ending: its exit says nothing about the job
            spec = self.group.specs[event.index]
            fact = self.facts.record(source="exit", index=event.index, rank=spec.rank,
                                     pid=self.group.procs[event.index].pid, code=event.code, at=event.at)  # fmt: skip
            failed = event.code != 0 and not (
                self.ending.at is None and self.relauncher.consider(fact, self.shim_signal is not None)
            )
            if failed and self.ending.open():
                self.output.settle(event.index, _SETTLE)  # its last lines are in its log before they are evidence
        elif isinstance(event, WorkerDeath):
            if self.plan.watch_workers or event.attempt is not None:  # else: of which launcher attempt?
                fact = self.facts.record(source="watch", index=event.index, rank=event.rank, pid=event.pid,
                                         code=event.code, at=event.at, attempt=event.attempt)  # fmt: skip
            if self.plan.watch_workers:
                failed = event.code is not None and event.code != 0
            else:  # the launcher restarts failed workers itself unless its gate says no
                failed = self.workers.gate.judge(event) is not None
            own = self.workers.gate.own_output(event) if failed and self.ending.open() else ()  # may hold the stop
        elif isinstance(event, LauncherLine):
            self.facts.record(source="summary", index=event.index, rank=self.workers.rank_of(event.pid),
                              pid=event.pid, code=event.code, at=event.at)  # fmt: skip
            failed = True
        if failed:
            self.begin_ending(fact if fact is not None and fact.rank is not None else None, own)

    def _signalled(self, event: ShimSignal | HostsEnd) -> None:
        if isinstance(event, HostsEnd):  # the coordinator ends this run: another host failed or was lost
            if self.shim_signal is None and self.hosts_end is None and self.ending.at is None:
                self.hosts_end = event.line
                if event.hung and self.silence is not None and not self.silence.gone:  # ended ranks: not hung
                    self._hang(hang_line(self.silence.quiet_for(time.monotonic()), "no running rank of any host"))
                self.begin_ending()
            elif self.ending.hold_until is not None:  # held for a peer: the job's failure is known elsewhere
                self.ending.begin()
            return
        signum = event.signum
        if self.shim_signal is None:
            self.shim_signal = signum
            if signum in (signal.SIGTERM, signal.SIGINT):
                self.ending.stop_sig = signal.Signals(signum)
            self.begin_ending()
        else:
            self.ending.kill_now()  # a second signal: no more grace

    def begin_ending(self, failure: Optional[Death] = None, own: Sequence[str] = ()) -> None:
        """The job ends (:meth:`.ending.Ending.begin`); a failure whose log (or ``own``) names a peer's holds it."""
        first, held = self.ending.at is None, self.ending.hold_until is not None
        if first:
            self.output.quiet()
            self.relauncher.pending.clear()
        says_peer = (first or held) and failure is not None and self.facts.says_peer_failed(failure, own)
        if held and (says_peer or _stopped(failure)):
            return  # another death that names a peer's failure, or one by a stop signal the shim never sent (a
            # launcher's own: torchrun's monitor tick may have seen the first failure before its gate paused it):
            # the hold goes on, for that peer to die by itself
        pause = self.plan.restart_on is None and not self.launcher.kills_peers  # torchrun without a gate of its own
        self.ending.begin(hold=says_peer, pause_launchers=pause)  # (paused while the stop is held)
        if self.link is not None and self.hosts_end is None and self.shim_signal is None and (first or held):
            # the other hosts end now, or when this host's hold is over (early: a death without peer words)
            self.link.failing(self.ending.held_for() if first else 0.0)

    # -- poll -------------------------------------------------------------------------------------------------------
    def poll(self) -> bool:
        """Absorb what happened and drive the ending one step; False once every process has exited."""
        if not self.group.running() and not self.relauncher.pending:
            return False
        with contextlib.suppress(queue.Empty):
            event = self.events.get(timeout=_TICK if self.ending.at is not None or self.relauncher.pending else 0.5)
            self.absorb(event)
            if isinstance(event, WorkerDeath) and self.ending.at is not None and not self.ending.ended_launchers:
                self._tick_at = 0.0  # the last worker's death lets the launcher go: look now, not at the next tick
        now = time.monotonic()
        if now < self._tick_at:
            return True
        self._tick_at = now + _TICK
        if now >= self._announce_at:
            self._announce_at = now + _ANNOUNCE_EVERY
            self.guards.watchdog.announce(self.tree.find())
            proctree.reap_zombie_children(_own_pids(self.group, self.tree))
            if self.silence is not None and self.ending.at is None:
                self._look(now, self.silence)
        self.relauncher.start_due(now, self._start_failed)
        self.ending.tick(now)
        return True

    def _look(self, now: float, silence: Silence) -> None:
        """Hang detection: one host ends a silent attempt; in a multi-host job the coordinator decides."""
        changed = silence.changed(now)
        if changed is not None and self.link is not None:
            self.link.silent(changed.silent, changed.ended)
        elif changed is not None and changed.silent:
            self._hang(hang_line(silence.quiet_for(now)))
            self.begin_ending()

    def _hang(self, line: str) -> None:
        assert self.silence is not None
        self.hung = hang_verdict(self.silence, rank_pids(self.group, self.workers), self.output, self.plan.host, line,
                                 self.facts.succeeded())  # fmt: skip

    def _start_failed(self, error: LaunchError) -> None:
        self.error = error
        self.begin_ending()

    def _pause(self, seconds: float) -> bool:
        """The ending's pause between looks: events still count (a second signal to the shim ends the grace)."""
        with contextlib.suppress(queue.Empty):
            self.absorb(self.events.get(timeout=seconds))
        return self.ending.killed_at is not None

    # -- close ------------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """End whatever of the job is left (daemons included), drain every output, stop the watch."""
        if self._finished:
            return
        self._finished = True
        self.workers.gate.release()
        left = kill_everything(self.tree, self.group.live_groups(), self.ending.grace_left(), self._pause)
        left += self.group.reap(5.0)
        left += self.guards.kill_cgroup()
        if left:
            self.output.warn(f"processes {sorted(set(left))} survived SIGKILL (stuck in the kernel?)")
        self.workers.stop()
        self.output.drain(self.group.procs)
        self.group.join(1.0)

    def result(self, started: float) -> RunResult:
        """The run's result, once every process has ended and every event was absorbed."""
        while not self.events.empty():  # one consumer: this thread
            self.absorb(self.events.get_nowait())
        self.facts.record_final(self.output.sinks[0].text(), self.workers.error_files(), self.started_wall)
        stopped = self.shim_signal is not None or self.hosts_end is not None or self.hung is not None
        killed = self.ending.killed_at is not None
        failure = self.facts.root_cause(killed, stopped, self.workers.pid_ranks(), self.ending.stopped_at)
        failure = self.hung.failure if self.hung is not None and self.shim_signal is None else failure
        return _seen(self.facts.result(failure, self.shim_signal, self.hosts_end, started, self.workers.gate,
                                       self.relauncher.relaunched, self.hung), self.ending.at)  # fmt: skip


def _own_pids(group: ProcessGroup, tree: JobTree) -> Set[int]:
    """The children not to reap as orphans: the run's processes, the shim's from before it, the watchdog."""
    return group.pids() | tree.foreign


def _seen(result: RunResult, ending: Optional[float]) -> RunResult:
    """``result`` with the time its ending began (the first failure seen; ``ending``: monotonic) on the wall clock."""
    return result if ending is None else result._replace(seen_at=time.time() - (time.monotonic() - ending))


def _stopped(death: Optional[Death]) -> bool:
    """A death by a stop signal (SIGTERM, SIGINT, SIGHUP): it says nothing of its own about the job."""
    return death is not None and death.code is not None and -death.code in _STOP_SIGNALS


def _run(supervisor: Supervisor, handle_signals: bool, started: float, beacon: ProgressBeacon) -> RunResult:
    """start, poll to the end (``beacon``: this host's progress line, looked at after each poll), close; the
    result."""
    if handle_signals:
        supervisor.guards.handle_signals(supervisor._on_signal)
    try:
        supervisor.start()
        if supervisor.error is not None:
            supervisor.close()
            raise supervisor.error
        while supervisor.poll():
            beacon.look(time.monotonic())
        beacon.finish(time.monotonic())  # the ranks' last records, while the console takes lines
        supervisor.close()
        if supervisor.error is not None:
            raise supervisor.error
        return supervisor.result(started)
    except BaseException:
        supervisor.close()
        raise
    finally:
        supervisor.output.close()
        supervisor.guards.release(lambda: proctree.reap_zombie_children(_own_pids(supervisor.group, supervisor.tree)))


def run_plan(
    plan: LaunchPlan,
    base_env: Mapping[str, str],
    launcher: Launcher,
    *,
    console_out: Optional[BinaryIO] = None,
    console_err: Optional[BinaryIO] = None,
    handle_signals: bool = True,
    early: Optional[EarlyGuards] = None,
    link: Optional[AttemptLink] = None,
    hang_timeout: float = 0.0,
    on_round: Optional[Callable[[List[Round]], None]] = None,
) -> RunResult:
    """Run every process of ``plan`` to the end with ``launcher``'s hooks and say how it ended.

    Args:
        plan: what to start (executed exactly as ``--dry-run`` prints it).
        base_env: the environment every process inherits (``spec.env`` is laid over it).
        launcher: the plan's launcher (:func:`malaunch.entrypoint.launchers.running.launcher_of`).
        console_out: where prefixed stdout lines go (default: this process's stdout).
        console_err: where prefixed stderr lines go (default: this process's stderr).
        handle_signals: catch SIGTERM/SIGINT/SIGHUP while running (main thread only).
        early: the job's token, watchdog and cgroup set up before planning (:class:`.procs.guards.EarlyGuards`),
            else each is set up at the start.
        link: the other hosts of a multi-host job (:mod:`.hosts`): told when this run fails; they may end it.
        hang_timeout: ``MALAUNCH_HANG_TIMEOUT`` (:mod:`.hang`; 0: off): every process gets the attempt's
            ``MALAUNCH_PROGRESS_FILE``.
        on_round: told the times of the launcher's own attempts at each change, when it restarts its workers
            itself (:class:`.procs.watch.Round`; the time to recover, :mod:`.recovery`).

    Raises:
        LaunchError: the log directory or a log file cannot be written, or a program cannot be started
            (the processes already started are torn down first).
    """
    started = time.monotonic()
    out = console_out if console_out is not None else sys.stdout.buffer
    err = console_err if console_err is not None else sys.stderr.buffer
    progress = os.path.join(plan.log_dir, PROGRESS_NAME) if hang_timeout > 0 else None
    if progress is not None:
        base_env = {**base_env, PROGRESS_VAR: progress}
    supervisor = Supervisor(plan, launcher, base_env, out, err, early, link)
    supervisor.workers.on_round = on_round
    try:
        prepare_folders(plan)
        if progress is not None:
            make_progress_file(progress)
        supervisor.output.open()
    except BaseException:
        supervisor.output.close()
        raise
    if progress is not None:
        supervisor.silence = Silence(hang_timeout, rank_sinks(supervisor.output), progress, time.monotonic(),
                                     lambda: rank_pids(supervisor.group, supervisor.workers),
                                     supervisor.workers.running)  # fmt: skip
    beacon = ProgressBeacon.of(base_env, supervisor.output.say, time.monotonic())  # what a cloud job's status reads
    if link is None:
        return _run(supervisor, handle_signals, started, beacon)
    link.attach(supervisor.events.put)  # the coordinator's "end" reaches this run from now on
    try:
        return _run(supervisor, handle_signals, started, beacon)
    finally:
        link.attach(None)
