"""torchrun's own restarts under the shim's restart policy: hold torchrun, judge the failure, resume or end.

With ``--max_restarts`` torchrun starts its worker group again after *any* failure. The supervisor's watch
(:mod:`...run.procs.watch`) sees each worker die through its pidfd the moment it happens, with the exit status read from
the zombie, while torchrun notices only at its next monitor tick (every 0.1 s) when it reaps the worker. For a
plan with ``restart_on`` set, :class:`AttemptGate` uses that head start:

1. :meth:`AttemptGate.hold`, called by the watch thread as it reports a failed worker, stops torchrun
   (SIGSTOP): from then on torchrun cannot reap, stop the group or start another attempt until the decision.
2. :meth:`AttemptGate.judge`, called by the supervisor's event loop for the same death: the first failure of an
   attempt is classified (:mod:`...report.failure_class`) from facts: its exit status, and the output the worker wrote
   itself into torchrun's per-attempt ``stdout.log``/``stderr.log``/``error.json`` (complete at its death,
   unlike the console copy torchrun tees). If ``restart_on`` accepts it, torchrun is resumed (SIGCONT) and
   restarts as usual. If not, the gate ends torchrun: SIGTERM, then SIGCONT; the pending SIGTERM is delivered
   as torchrun resumes, its handler raises at once and torchrun shuts the workers down instead of restarting.
   The supervisor then ends the job as for any failure, and that worker is the root cause.
3. Deaths by a stop signal (SIGTERM, SIGINT, SIGHUP: how torchrun stops the rest of its group) are never
   judged, whatever their order (a watch slowed down by load may see them first), and neither are later
   failures of an attempt already judged: they are recorded, and torchrun is resumed after each of them.

Every SIGSTOP is followed by the ``judge`` of the same death (the watch posts the death after holding), so
torchrun is never left stopped; :meth:`AttemptGate.release` resumes it anyway before the final teardown. The
gate also keeps what each attempt left: its workers' error files and the time its last worker died.
Every signal to torchrun goes through :func:`...run.procs.proctree.signal_proven` with the pid and start time read
when torchrun was started, so a pid reused after torchrun was reaped is never hit.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

from ...report.failure_class import classify_failure, peer_failure
from ...report.report import Failure, LauncherAttempt
from ...report.rootcause import Death, attempt_facts, find_root_cause, teardown_signals
from ...run.launcher import Gate
from ...run.policy import RestartPolicy, should_restart
from ...run.procs import proctree
from .errors import worker_output_tail

if TYPE_CHECKING:  # the gate works only under torchrun with restarts: its helpers are imported when it judges
    from ...report.failure_class import Classification
    from ...run.policy import RestartPolicy
    from ...run.procs.proctree import ProcKey
    from ...run.procs.watch import WorkerDeath

__all__ = ["AttemptGate"]


_STOP_SIGNALS = teardown_signals(False, False)


def _judged_kind(death: WorkerDeath) -> bool:
    """A failure worth judging: not a success, not unknown, not a death by a stop signal."""
    return bool(death.code) and death.code is not None and -death.code not in _STOP_SIGNALS


def _signal(launcher: Optional[ProcKey], sig: int) -> None:
    """``sig`` to the launcher if it is still that process (pid and start: never a reused pid)."""
    if launcher is not None:
        proctree.signal_proven(launcher, sig)


class AttemptGate(Gate):
    """Applies ``restart_on`` to the first failure of each torchrun attempt; ``launchers``: plan index -> the
    launcher (pid and start)."""

    def __init__(self, restart_on: Optional[Union[str, Tuple[int, ...]]], launchers: Dict[int, ProcKey]) -> None:
        self.policy: Optional[RestartPolicy] = None
        if restart_on is not None:
            self.policy = RestartPolicy(restart_on=restart_on)
        self.launchers = dict(launchers)
        self.lock = threading.Lock()
        self.judged: Set[Optional[int]] = set()  # attempts whose first failure was judged
        self.ended: Optional[Classification] = None  # the class of the failure that ended the job
        self.error_files: Dict[Tuple[Optional[int], int], str] = {}  # (attempt, rank) -> error file
        self.last_death: Dict[int, float] = {}  # attempt -> monotonic time its last worker died
        self.failure_seen = False  # without restart_on: a failed worker was seen (only the first may pause)
        self.peer_paused = False  # without restart_on: torchrun was paused after a death that names a peer

    @property
    def active(self) -> bool:
        """Whether the gate decides anything (a ``restart_on`` to apply)."""
        return self.policy is not None

    def hold(self, death: WorkerDeath) -> None:
        """Watch thread: stop the launcher while a failure its attempt has not seen yet is judged. Without a
        ``restart_on``: stop it at the first failure, before its output is read (torchrun's next monitor tick would
        stop the other workers), and resume it at once unless that output names a peer failure (then the ending
        resumes it: :class:`...run.ending.Ending`)."""
        if self.policy is None:
            if _judged_kind(death) and not self.failure_seen:
                self.failure_seen = True

                launcher = self.launchers.get(death.index)
                _signal(launcher, signal.SIGSTOP)  # first: its monitor tick may come while the output is read
                if peer_failure(self.own_output(death)) is not None:
                    self.peer_paused = True
                else:
                    _signal(launcher, signal.SIGCONT)
            return
        if not _judged_kind(death) or self.ended is not None:
            return
        with self.lock:
            if death.attempt in self.judged:
                return
        _signal(self.launchers.get(death.index), signal.SIGSTOP)

    def note(self, death: WorkerDeath) -> None:
        """Keep what a death tells about its attempt (every death, failed or not, judged or not)."""
        if death.attempt is not None:
            self.last_death[death.attempt] = max(self.last_death.get(death.attempt, death.at), death.at)
        if death.error_file:
            self.error_files[(death.attempt, death.rank)] = death.error_file

    def judge(self, death: WorkerDeath) -> Optional[Classification]:
        """Event loop: the class of ``death`` when it ends the job (the launcher is told to stop), else None
        (the launcher is resumed and restarts as it would on its own)."""
        self.note(death)
        if self.policy is None:
            return None
        launcher = self.launchers.get(death.index)
        if death.code is None or not _judged_kind(death) or self.ended is not None:
            _signal(launcher, signal.SIGCONT)
            return None
        with self.lock:
            first = death.attempt not in self.judged
            self.judged.add(death.attempt)
        if not first:
            _signal(launcher, signal.SIGCONT)
            return None

        shell = 128 - death.code if death.code < 0 else death.code
        tail = worker_output_tail(death.error_file)
        kind = classify_failure(shell, tail, signal=-death.code if death.code < 0 else None)
        if should_restart(self.policy, kind, shell):
            _signal(launcher, signal.SIGCONT)
            return None
        self.ended = kind
        _signal(launcher, signal.SIGTERM)  # pending while stopped: handled first thing once resumed
        _signal(launcher, signal.SIGCONT)
        return kind

    def release(self) -> None:
        """Resume every launcher (before the teardown signals them)."""
        if self.policy is not None or self.peer_paused:
            for launcher in self.launchers.values():
                _signal(launcher, signal.SIGCONT)

    def own_output(self, death: WorkerDeath) -> Tuple[str, ...]:
        """What the worker wrote itself into torchrun's per-attempt files (the copy in ``rank-N.log`` may lag)."""

        return worker_output_tail(death.error_file)

    def tail_of(self, attempt: Optional[int], rank: Optional[int]) -> Tuple[str, ...]:
        """What a worker of ``attempt`` wrote itself (see :func:`.errors.worker_output_tail`)."""

        return worker_output_tail(self.error_files.get((attempt, rank), "")) if rank is not None else ()

    def folder_of(self, attempt: int) -> Optional[str]:
        """torchrun's ``attempt_<n>`` folder, as the workers' error files name it."""
        for (number, _), path in sorted(self.error_files.items(), key=lambda item: str(item[0])):
            if number == attempt:
                return os.path.dirname(os.path.dirname(path))
        return None

    def history(
        self, facts: Sequence[Death], final: Optional[Failure], started: float, failure_of: Callable[[Death], Failure]
    ) -> Tuple[LauncherAttempt, ...]:
        """Every torchrun attempt the facts know of, with its own root cause: the last one's is ``final``; an
        earlier one's comes from its own facts (torchrun's SIGTERM to the group is collateral) and its tail from
        the output that worker wrote itself. ``failure_of`` makes a :class:`Failure` of a fact."""
        attempts = sorted({fact.attempt for fact in facts if fact.attempt is not None})
        history: List[LauncherAttempt] = []
        begin = started
        for number in attempts:
            folder = self.folder_of(number) or ""
            if number == attempts[-1]:
                history.append(LauncherAttempt(number, final, time.monotonic() - begin, folder))
                break
            end = max(begin, self.last_death.get(number, begin))
            cause = find_root_cause(attempt_facts(facts, number, False), _STOP_SIGNALS)
            failure = None
            if cause is not None:
                failure = failure_of(cause.death)
                failure = failure._replace(tail=self.tail_of(number, failure.rank) or failure.tail)
            history.append(LauncherAttempt(number, failure, end - begin, folder, True))
            begin = end
        return tuple(history)
