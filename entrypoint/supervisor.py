"""Execute a :class:`~malaunch.entrypoint.plan.LaunchPlan`: start all, forward output, end the job, say why.

Contract of :func:`run_plan`:

1. The log directory and every log file are created before anything starts; if that fails, ``LaunchError``.
2. All processes start at once, each in a session of its own, with ``{**base_env, **spec.env}`` (plus the
   ``spec.env_defaults`` the environment lacks) and ``MALAUNCH_SHIM_TOKEN``; a program that cannot be started
   tears down the others and raises ``LaunchError``.
3. Output follows ``plan.log_source`` (:mod:`._router`); the console never slows a rank down.
4. Facts are recorded as they come (:mod:`.rootcause`): each process's exit, each launcher worker's death
   (:mod:`._watch`), msrun's failure lines, and at the end torchrun's summary (when it wrote one) and the
   workers' error files. The first failure starts the *ending*: the stop signal (SIGTERM, or the signal the
   shim received) goes to every process of the job except the launchers; ``plan.grace_period`` later
   everything left gets SIGKILL. The launcher (torchrun, msrun) gets SIGKILL (by pid) right as the ending
   starts when the watch has seen every worker of this host in the latest attempt and knows the exit status
   of every worker death: the root cause comes from those facts, not from the launcher's summary, and the
   workers write their output into files themselves (``plan.log_source`` ``attempt_files``, ``files``), which
   are read to the end once every worker is gone; the killed launcher's exit is no fact. Otherwise torchrun is
   left to write its summary and killed once it has, or 5 s after its last worker is gone; msrun is left to
   notice and exit, and killed 5 s after its workers are gone. The root cause is then decided from the facts
   by a pure function.
5. SIGTERM, SIGINT and SIGHUP to the shim end the job the same way; the result is 128+signal. A second signal
   skips the rest of the grace period. SIGUSR1 (a peer host restarted, :mod:`.peers`) ends it as a failure
   whose root cause, unless a rank failed first, is :func:`~.peers.peer_restart_failure` (exit code 3).
   Under torchrun with ``plan.restart_on`` a worker's failure ends the job only when :mod:`._attempt_gate`
   says ``restart_on`` rejects it; facts carry torchrun's attempt, the root cause is the last attempt's, and
   ``RunResult.launcher_attempts`` has every attempt's.
6. A watchdog program (its own name and session) ends the job's processes should the shim itself die.
7. On return every output is drained, no process of the job is left (token carriers, and everything that was
   reparented to the shim as subreaper: daemons included), and every child has been reaped.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, BinaryIO, Dict, List, Mapping, Optional, Set, Union

from . import proctree
from ._attempt_gate import AttemptGate
from ._cgroup import JobCgroup
from ._pump import tune_malloc
from ._reaper import TOKEN_VAR, JobTree, Watchdog, kill_everything, new_token, start_watchdog
from ._router import LOG_HINT, Output, write_plan_file
from ._watch import WorkerDeath, WorkerWatch
from .errors import LaunchError
from .failure_class import peer_failure
from .peers import PEER_RESTART_SIGNAL, peer_restart_failure
from .plan import LaunchPlan
from .report import Failure, RunResult, parse_msrun_failures, parse_torchrun_failures
from .rootcause import PEER_WINDOW, Death, attempt_facts, find_root_cause, name_ranks, teardown_signals

if TYPE_CHECKING:
    from ._errorfiles import ErrorRecord

__all__ = ["TOKEN_VAR", "Failure", "RunResult", "run_plan"]

#: torch elastic's agent logs this as a worker of its group fails (``... failed (exitcode: -9) local_rank: 1``).
_AGENT_FAILED = b"failed (exitcode:"

_HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, PEER_RESTART_SIGNAL)
_WATCHDOG_GRACE_CAP = 2.0
_LAUNCHER_SETTLE = 5.0  # a launcher whose workers are gone gets this long to write its summary and exit
_TICK = 0.02
_ANNOUNCE_EVERY = 0.5


class ProcExit:
    """Event: a process the shim started ended (Popen return code). Events are slotted classes: defining a
    dataclass costs start-up time."""

    __slots__ = ("at", "code", "index")

    def __init__(self, index: int, code: int, at: float) -> None:
        self.index, self.code, self.at = index, code, at


class LauncherLine:
    """Event: msrun said "Worker process <pid> exit with exception. Error code: <code>"."""

    __slots__ = ("at", "code", "index", "pid")

    def __init__(self, index: int, pid: int, code: int, at: float) -> None:
        self.index, self.pid, self.code, self.at = index, pid, code, at


class ShimSignal:
    """Event: the shim itself received a signal."""

    __slots__ = ("signum",)

    def __init__(self, signum: int) -> None:
        self.signum = signum


Event = Union[ProcExit, LauncherLine, ShimSignal, WorkerDeath]


def _shell_code(code: int) -> int:
    return 128 - code if code < 0 else code


class _Run:
    """One :func:`run_plan` call: the process group, its output, its watch, its facts and its ending."""

    def __init__(self, plan: LaunchPlan, base_env: Mapping[str, str], out: BinaryIO, err: BinaryIO) -> None:
        self.plan = plan
        self.base_env = base_env
        self.output = Output(plan, out, err)
        self.output.on_launcher_lines = self._launcher_lines
        self.token = new_token()
        self.events: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self.procs: List[subprocess.Popen[bytes]] = []
        self.waiters: List[threading.Thread] = []
        self.returncodes: Dict[int, int] = {}
        self.facts: List[Death] = []
        self.launchers = plan.method in ("torchrun", "msrun")
        self.watch: Optional[WorkerWatch] = None
        self.gate = AttemptGate(None, {})
        self.tree = JobTree(self.token, ())
        self.shim_signal: Optional[int] = None
        self.peer_restart = False  # a peer host restarted the job (PEER_RESTART_SIGNAL): this attempt ends
        self.ending_at: Optional[float] = None
        self.stop_sig = signal.SIGTERM
        self.killed_at: Optional[float] = None
        self.hold_until: Optional[float] = None  # the stop held after a failure that names a peer's
        self.ended_launchers: Set[int] = set()  # plan indices of the launchers the shim killed during the ending
        self.signalled: Set[proctree.ProcKey] = set()
        self.started_wall = time.time()
        self._finished = False
        self.cgroup: Optional[JobCgroup] = None

    # -- facts --------------------------------------------------------------------------------------------
    def record(self, fact: Death) -> None:
        self.facts.append(fact)

    def _fact(self, **fields: Any) -> Death:
        return Death(seq=len(self.facts), **fields)

    def _launcher_lines(self, index: int, lines: bytes) -> None:
        if self.plan.watch_workers and _AGENT_FAILED in lines:
            # the launcher's agent saw a worker fail (one the watch may have missed): what it prints from here on
            # is teardown chatter, its log file only; quiet now, before these very lines reach the console
            self.output.quiet()
        for pid, code in parse_msrun_failures(lines):
            self.events.put(LauncherLine(index, pid, code, time.monotonic()))

    # -- before anything starts ---------------------------------------------------------------------------
    def prepare(self) -> None:
        plan = self.plan
        try:
            os.makedirs(plan.log_dir, exist_ok=True)
        except OSError as error:
            raise LaunchError(f"cannot create log directory {plan.log_dir!r}: {error.strerror}; {LOG_HINT}") from None
        if not os.access(plan.log_dir, os.W_OK | os.X_OK):
            raise LaunchError(f"log directory {plan.log_dir!r} is not writable; {LOG_HINT}")
        for path, text in sorted(plan.files.items()):
            write_plan_file(path, text)
        for spec in plan.processes:
            if not spec.argv:
                raise LaunchError(f"process {spec.name!r} has an empty command line: the plan is broken")
            if spec.cwd:
                try:
                    os.makedirs(spec.cwd, exist_ok=True)
                except OSError as error:
                    raise LaunchError(
                        f"cannot create working directory {spec.cwd!r} for {spec.name}: {error.strerror}; "
                        "check the path and its permissions"
                    ) from None
        self.output.open()

    # -- start ----------------------------------------------------------------------------------------------
    def start(self) -> Optional[LaunchError]:
        for spec in self.plan.processes:
            defaults = {k: v for k, v in spec.env_defaults.items() if k not in self.base_env and k not in spec.env}
            env = {**self.base_env, **defaults, **spec.env, TOKEN_VAR: self.token}
            try:
                proc = subprocess.Popen(
                    list(spec.argv),
                    env=env,
                    cwd=spec.cwd or None,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                    bufsize=0,
                )
            except OSError as error:
                return LaunchError(
                    f"cannot start {spec.name}: {spec.argv[0]!r}: {error.strerror}; "
                    "check that the program exists, is executable and is on PATH"
                )
            self.procs.append(proc)
        if self.launchers:
            self.tree.launchers = {proc.pid for proc in self.procs}
        return None

    def start_threads(self) -> None:
        tune_malloc()  # after the ranks started: it loads ctypes, which costs start-up time
        for index, proc in enumerate(self.procs):
            waiter = threading.Thread(target=self._wait, args=(index, proc), name="wait", daemon=True)
            waiter.start()
            self.waiters.append(waiter)
        self.output.attach(self.procs, lambda: None)
        if self.launchers:  # also tells msrun's pids' ranks; ends the job only with plan.watch_workers
            launchers = {proc.pid: index for index, proc in enumerate(self.procs)}
            self.gate = AttemptGate(self.plan.restart_on, {index: pid for pid, index in launchers.items()})
            self.watch = WorkerWatch(TOKEN_VAR, self.token, launchers, self._worker_died)
            self.watch.start()

    def _worker_died(self, death: WorkerDeath) -> None:
        """Called by the watch thread: after a worker's failure whatever the launcher prints is teardown chatter (a
        worker that exits 0 ends nothing: msrun may still be saying it spawned the job)."""
        if self.plan.watch_workers and death.code != 0:
            self.output.quiet()
        self.gate.hold(death)  # before the event: torchrun must not restart before the loop has judged it
        self.events.put(death)

    def _wait(self, index: int, proc: subprocess.Popen[bytes]) -> None:
        code = proc.wait()
        self.events.put(ProcExit(index, code, time.monotonic()))

    def _on_signal(self, signum: int, frame: object) -> None:
        self.events.put(ShimSignal(signum))  # SimpleQueue.put is reentrant: safe in a signal handler

    # -- events ---------------------------------------------------------------------------------------------
    def absorb(self, event: Event) -> None:
        """Record the fact an event carries; a failure (or a signal) starts the ending."""
        failed = False
        if isinstance(event, ProcExit):
            self.returncodes[event.index] = event.code
            if event.index in self.ended_launchers:
                return  # the shim killed it during the ending: its exit says nothing about the job
            spec = self.plan.processes[event.index]
            self.record(self._fact(source="exit", index=event.index, rank=spec.rank,
                                   pid=self.procs[event.index].pid, code=event.code, at=event.at))  # fmt: skip
            failed = event.code != 0
        elif isinstance(event, WorkerDeath):
            if self.plan.watch_workers or event.attempt is not None:  # else: of which launcher attempt?
                self.record(self._fact(source="watch", index=event.index, rank=event.rank, pid=event.pid,
                                       code=event.code, at=event.at, attempt=event.attempt))  # fmt: skip
            if self.plan.watch_workers:
                failed = event.code is not None and event.code != 0
            else:  # the launcher restarts failed workers itself (torchrun --max_restarts) unless the gate says no
                failed = self.gate.judge(event) is not None
        elif isinstance(event, LauncherLine):
            rank = self.watch.pid_ranks.get(event.pid) if self.watch is not None else None
            self.record(self._fact(source="summary", index=event.index, rank=rank, pid=event.pid,
                                   code=event.code, at=event.at))  # fmt: skip
            failed = True
        elif isinstance(event, ShimSignal) and event.signum == PEER_RESTART_SIGNAL:
            if self.shim_signal is None and not self.peer_restart:
                self.peer_restart = True
                failed = True
        elif isinstance(event, ShimSignal):
            if self.shim_signal is None:
                self.shim_signal = event.signum
                if event.signum in (signal.SIGTERM, signal.SIGINT):
                    self.stop_sig = signal.Signals(event.signum)
                self.begin_ending()
            else:
                self.kill_now()  # a second signal: no more grace
        if failed:
            worker = isinstance(event, (WorkerDeath, ProcExit)) and self.facts and self.facts[-1].rank is not None
            self.begin_ending(self.facts[-1] if worker else None)

    def begin_ending(self, failure: Optional[Death] = None) -> None:
        """The job ends: stop every process now, unless the failure that ends it says a peer failed (its log
        tail) and others still run: then their stop waits up to :data:`PEER_WINDOW` s (or the next failure), so
        the peer that really failed can finish dying by itself, not by the teardown's signal."""
        if self.ending_at is None:
            self.ending_at = time.monotonic()
            self.output.quiet()
            if failure is not None and self._says_peer_failed(failure):
                self.hold_until = self.ending_at + min(PEER_WINDOW, self.plan.grace_period)
                return
            self._stop_all()
        elif self.hold_until is not None:  # a second failure, or a stop signal, during the hold
            self._stop_all()

    def _says_peer_failed(self, failure: Death) -> bool:
        return peer_failure(self.output.log_of(failure.index, failure.rank).tail()) is not None

    def _stop_all(self) -> None:
        self.hold_until = None
        self.stop_workers(self.stop_sig)
        if self._statuses_known():
            self.end_launchers()  # at once: its teardown (tens of ms to die) overlaps the workers'

    def stop_workers(self, sig: int) -> None:
        """``sig`` to every process of the job not signalled yet, except the launchers themselves."""
        fresh = [key for key in self.tree.find(launchers=not self.launchers) if key not in self.signalled]
        self.tree.signal(fresh, sig)
        self.signalled.update(fresh)
        if not self.launchers:
            self.tree.signal_groups(self._live_groups(), sig)

    def kill_now(self) -> None:
        if self.killed_at is None:
            self.killed_at = time.monotonic()
        self.tree.signal(self.tree.find(launchers=not self.launchers), signal.SIGKILL)

    def _live_groups(self) -> List[int]:
        return [proc.pid for index, proc in enumerate(self.procs) if index not in self.returncodes]

    def monitor(self, watchdog: Watchdog) -> None:
        """Absorb events until every process the shim started has exited, driving the ending on the way."""
        settle_at: Optional[float] = None
        announce_at = time.monotonic() + _ANNOUNCE_EVERY  # no /proc scan while the ranks start up
        tick_at = 0.0
        while len(self.returncodes) < len(self.procs):
            with contextlib.suppress(queue.Empty):
                event = self.events.get(timeout=_TICK if self.ending_at is not None else 0.5)
                self.absorb(event)
                if isinstance(event, WorkerDeath) and self.ending_at is not None and not self.ended_launchers:
                    tick_at = 0.0  # the last worker's death lets the launcher go: look now, not at the next tick
            now = time.monotonic()
            if now < tick_at:
                continue
            tick_at = now + _TICK
            if now >= announce_at:
                announce_at = now + _ANNOUNCE_EVERY
                watchdog.announce(self.tree.find())
                proctree.reap_zombie_children(self._own_pids())
            if self.ending_at is None:
                continue
            if self.hold_until is not None:
                if now < self.hold_until and self.killed_at is None:
                    continue
                self._stop_all()
            if self.killed_at is None and now >= self.ending_at + self.plan.grace_period:
                self.killed_at = now
            left = self.tree.find(launchers=not self.launchers)
            if self.killed_at is not None:
                self.tree.signal(left, signal.SIGKILL)
            else:  # newcomers get the stop signal too
                self.tree.signal([key for key in left if key not in self.signalled], self.stop_sig)
                self.signalled.update(left)
            if self.launchers and settle_at is None and not left:
                settle_at = now + _LAUNCHER_SETTLE
            if settle_at is not None and self._summary_written():
                settle_at = now  # torchrun has said everything: no need to wait for its interpreter to wind down
            if settle_at is not None and now >= settle_at:
                self.end_launchers(groups=True)

    def _statuses_known(self) -> bool:
        """Under torchrun or msrun, the watch saw every worker of this host in the latest attempt and read the
        exit status of every worker death: the facts decide the root cause without the launcher's summary (and
        the workers write their output into files themselves, ``attempt_files``/``files``). A worker that died
        before the watch's first look is known only to the launcher: then its summary is waited for."""
        if self.plan.log_source not in ("attempt_files", "files") or self.watch is None:
            return False
        seen = dict(self.watch.attempt_ranks)  # a copy: the watch thread adds to it
        if not seen:
            return False
        latest = max(seen, key=lambda attempt: -1 if attempt is None else attempt)
        if not set(self.plan.rank_logs) <= set(seen[latest]):
            return False
        return all(fact.code is not None for fact in self.facts if fact.source == "watch")

    def end_launchers(self, groups: bool = False) -> None:
        """SIGKILL the launchers still running (with ``groups``, their process groups too: once their workers
        are gone); their exits are not facts."""
        for index, proc in enumerate(self.procs):
            if index in self.returncodes:
                continue
            self.ended_launchers.add(index)
            if groups:
                self.tree.signal_groups([proc.pid], signal.SIGKILL)
                continue
            # Not its group (a worker left in torchrun's group must die of the stop signal, not of SIGKILL), and
            # only while it is provably still our unreaped child (the waiter may reap it at any moment).
            info = proctree.read_info(proc.pid)
            if info is not None and info.ppid == os.getpid() and not info.zombie and proc.returncode is None:
                proctree.signal_proven(proctree.ProcKey(proc.pid, info.start), signal.SIGKILL)

    def _summary_written(self) -> bool:
        """torchrun printed its whole failure summary: it has nothing more to say."""
        if self.plan.method != "torchrun":
            return False
        text = self.output.sinks[0].text()
        at = text.rfind("Root Cause (first observed failure):")
        return at >= 0 and "=" * 20 in text[at:]

    def _own_pids(self) -> Set[int]:
        return {proc.pid for proc in self.procs} | self.tree.foreign

    def drain_events(self) -> None:
        while True:
            try:
                self.absorb(self.events.get_nowait())
            except queue.Empty:
                return

    # -- result -------------------------------------------------------------------------------------------
    def launcher_facts(self) -> None:
        """What the launchers wrote down: torchrun's summary (absent when the shim ended torchrun first) and the
        workers' error files."""
        if self.plan.method != "torchrun":
            return
        for entry in parse_torchrun_failures(self.output.sinks[0].text()):
            self.record(self._fact(source="summary", index=0, rank=entry.rank, pid=entry.pid, code=entry.exitcode))
        for record in self._error_files():
            self.record(self._fact(source="error_file", index=0, rank=record.rank, pid=None, code=None,
                                   message=record.message, attempt=record.attempt))  # fmt: skip

    def _error_files(self) -> List[ErrorRecord]:
        from ._errorfiles import read_error_files  # torchrun's error files are read at the end only

        known = dict(self.watch.error_files) if self.watch is not None else {}
        return read_error_files(known, self.plan.processes[0].argv, sorted(self.plan.rank_logs), self.started_wall)

    def result(self, started: float) -> RunResult:
        self.launcher_facts()
        escalated = self.killed_at is not None
        msrun = self.plan.method == "msrun"
        collateral = teardown_signals(msrun, escalated)
        attempts = sorted({fact.attempt for fact in self.facts if fact.attempt is not None})
        last = attempts[-1] if attempts else None
        facts = attempt_facts(self.facts, last, True)  # an earlier torchrun attempt's failure is not this one's
        if self.watch is not None:  # msrun names a worker by pid: the watch may have missed a short-lived one
            facts = name_ranks(facts, dict(self.watch.pid_ranks), sorted(self.plan.rank_logs))
        stopped = self.shim_signal is not None or self.peer_restart
        cause = find_root_cause(self._with_evidence(facts), collateral, stopped=stopped,
                                launcher_kills=msrun and not escalated)  # fmt: skip
        failure = self._failure(cause.death)._replace(why=cause.why) if cause is not None else None
        if failure is None and self.peer_restart and self.shim_signal is None:
            failure = peer_restart_failure(self.plan.host, self.plan.processes[0].log_file)
        if self.shim_signal is not None:
            code = 128 + self.shim_signal
        elif failure is not None:
            code = failure.exit_code or 1
        else:
            code = 0
        duration = time.monotonic() - started
        torchrun = self.plan.method == "torchrun"
        history = self.gate.history(self.facts, failure, started, self._failure) if torchrun else ()
        return RunResult(code, failure, self.shim_signal, duration, history)

    def _with_evidence(self, facts: List[Death]) -> List[Death]:
        """Each failed rank's facts with the peer failure its log tail or error file names (the evidence that
        orders deaths the shim could not order, :mod:`.rootcause`)."""
        found: Dict[int, Optional[str]] = {}
        for fact in facts:
            if fact.rank is not None and fact.rank not in found and (fact.code or fact.message):
                lines = list(self.output.log_of(fact.index, fact.rank).tail())
                messages = [f.message for f in facts if f.rank == fact.rank and f.message]
                found[fact.rank] = peer_failure(lines + messages)
        return [f.replace(evidence=found.get(f.rank)) if f.rank is not None else f for f in facts]

    def _failure(self, death: Death) -> Failure:
        spec = self.plan.processes[death.index]
        rank = death.rank if death.rank is not None else spec.rank
        ranks = sorted(self.plan.rank_logs)
        local = spec.local_rank if spec.rank is not None else (ranks.index(rank) if rank in ranks else None)
        sink = self.output.log_of(death.index, rank)
        code = death.code if death.code is not None else 1
        return Failure(
            name=f"rank-{rank}" if self.launchers and rank is not None else spec.name,
            rank=rank,
            local_rank=local,
            host=self.plan.host,
            pid=death.pid,
            exit_code=_shell_code(code),
            signal=-code if code < 0 else None,
            log_file=sink.path,
            tail=sink.tail(),
            message=death.message,
            source=death.source,
        )

    # -- the whole run --------------------------------------------------------------------------------------
    def execute(self, handle_signals: bool, started: float) -> RunResult:
        self.started_wall = time.time()
        subreaper: Optional[int] = None
        previous: Dict[int, Any] = {}
        if handle_signals and threading.current_thread() is threading.main_thread():  # else: cannot
            previous = {sig: signal.signal(sig, self._on_signal) for sig in _HANDLED}
        watchdog = Watchdog(None, None)
        try:
            self.tree.foreign.update(self._children_before())
            self.cgroup = JobCgroup.create(f"malaunch-{self.token}")
            if self.cgroup is not None:
                self.tree.cgroup = self.cgroup.path
            # The ranks start first; what can wait comes after, in this order: the watchdog (an interpreter of
            # its own), the moves into the job's cgroup (the kernel's first move into a new cgroup takes ~10 ms),
            # the announcements, the threads that read the output (the pipes hold it meanwhile: a full pipe
            # only pauses a rank, no byte is lost) and wait for the exits (the zombies keep them).
            error = self.start()
            # Right after the forks, not before: setting it loads ctypes (start-up time), and no rank can have
            # started, forked and left an orphan within the microseconds in between (the token finds one anyway).
            subreaper = proctree.set_subreaper()
            watchdog = self._start_watchdog()
            if self.cgroup is not None:
                for proc in self.procs:
                    self.cgroup.add(proc.pid)
                for key in self.tree.find():  # what a rank forked before its move (a daemon) joins it too
                    self.cgroup.add(key.pid)
            watchdog.announce_groups(proc.pid for proc in self.procs)
            self.start_threads()
            if error is not None:
                self.begin_ending()
                self.finish()
                raise error
            self.monitor(watchdog)
            self.finish()
            self.drain_events()
            return self.result(started)
        except BaseException:
            self.finish()
            raise
        finally:
            self.output.close()
            proctree.reap_zombie_children(self._own_pids())
            watchdog.finish()
            for sig, handler in previous.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            proctree.restore_subreaper(subreaper)

    def _children_before(self) -> Set[int]:
        """The shim's children from before the run (never part of it); no ``/proc`` scan when it has none."""
        if not proctree.has_children():
            return set()
        me = os.getpid()
        return {info.pid for info in proctree.descendants(me) if info.ppid == me}

    def _start_watchdog(self) -> Watchdog:
        """Start the watchdog program and tell it the job's cgroup; the watchdog is never part of the job."""
        grace = min(self.plan.grace_period, _WATCHDOG_GRACE_CAP)
        watchdog = start_watchdog(self.token, grace, dict(self.base_env))
        if watchdog.pid > 0:
            self.tree.foreign.add(watchdog.pid)
        if self.cgroup is not None:
            watchdog.announce_cgroup(self.cgroup.path)
        return watchdog

    def _pause(self, seconds: float) -> bool:
        """The ending's pause between looks: events still count (a second signal to the shim ends the grace)."""
        with contextlib.suppress(queue.Empty):
            self.absorb(self.events.get(timeout=seconds))
        return self.killed_at is not None

    def finish(self) -> None:
        """End whatever of the job is left (daemons included), drain every output, stop the watch."""
        if self._finished:
            return
        self._finished = True
        grace = self.plan.grace_period
        if self.killed_at is not None:
            grace = 0.0
        elif self.ending_at is not None:
            grace = max(0.0, self.ending_at + grace - time.monotonic())
        self.gate.release()
        left = kill_everything(self.tree, self._live_groups(), grace, self._pause)
        for proc in self.procs:
            try:
                proc.wait(5.0)
            except subprocess.TimeoutExpired:
                left.append(proc.pid)
        if self.cgroup is not None:
            left += self.cgroup.kill()
        if left:
            self.output.warn(f"processes {sorted(set(left))} survived SIGKILL (stuck in the kernel?)")
        if self.watch is not None:
            self.watch.stop()
        self.output.drain(self.procs)
        for waiter in self.waiters:
            waiter.join(1.0)


def run_plan(
    plan: LaunchPlan,
    base_env: Mapping[str, str],
    *,
    console_out: Optional[BinaryIO] = None,
    console_err: Optional[BinaryIO] = None,
    handle_signals: bool = True,
) -> RunResult:
    """Run every process of ``plan`` to the end and say how it ended.

    Args:
        plan: what to start (executed exactly as ``--dry-run`` prints it).
        base_env: the environment every process inherits (``spec.env`` is laid over it).
        console_out: where prefixed stdout lines go (default: this process's stdout).
        console_err: where prefixed stderr lines go (default: this process's stderr).
        handle_signals: catch SIGTERM/SIGINT/SIGHUP while running (main thread only).

    Raises:
        LaunchError: the log directory or a log file cannot be written, or a program cannot be started
            (the processes already started are torn down first).
    """
    started = time.monotonic()
    out = console_out if console_out is not None else sys.stdout.buffer
    err = console_err if console_err is not None else sys.stderr.buffer
    run = _Run(plan, base_env, out, err)
    try:
        run.prepare()
    except BaseException:
        run.output.close()
        raise
    return run.execute(handle_signals, started)
