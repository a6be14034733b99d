"""The one attempt loop: run a launch plan again, as a whole, after a failure a restart can help with.

The loop wraps a run function (:func:`~.supervisor.run_plan`) and asks the plan's :class:`~.launcher.Launcher`
what differs per method: attempt *K*'s plan (:meth:`~.launcher.Launcher.plan_attempt`) and how many attempts
it may make (:meth:`~.launcher.Launcher.attempt_limit`: one when the launcher restarts its workers itself).
What happens inside an attempt is the launcher's too: torchrun's own restarts judged by its gate, MindSpore's
relaunch of one process (:meth:`~.launcher.Launcher.relaunch`); each of those shows here as an attempt of its
own (``RunResult.launcher_attempts``). The policy is :mod:`.policy`'s.

:class:`AttemptLoop` runs every attempt, on one host and on several; who decides what comes next is its subclass
(template methods, as torch elastic's agent has them): :class:`HostAlone`, this host alone, or
:class:`~.hosts.jobloop.Coordinated`, the job's coordinator (several hosts). With a checkpoint folder
(:mod:`.checkpoints`) the loop, the same for both, checks it before anything starts and, before every attempt,
prunes it and gives the attempt ``MALAUNCH_RESUME_FROM``.

Contract of :func:`run_with_restarts` (:class:`HostAlone`):

1. Attempt 0 runs the plan; after a failure whose class ``restart_on`` accepts, and while fewer than
   ``max_restarts`` restarts were made, the whole group (already torn down by ``run_plan``) starts again after
   the back-off (``backoff * 2**(K-1)`` seconds, at most 30 or ``backoff`` if longer).
2. A signal to the shim during a run ends it as ``run_plan`` does (128+S, no restart); SIGTERM, SIGINT or SIGHUP
   during a back-off ends everything at once with 128+S.
3. The result is the last attempt's, with the whole duration; every attempt's root cause and class is kept in
   :class:`RestartOutcome` and goes into the JSON report (:func:`restart_report`). Every attempt a launcher
   made inside one run (torchrun's own, a relaunched process) is one :class:`Attempt`.
"""

import contextlib
import functools
import os
import signal
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple, Union

from ..plan.launch_plan import LaunchPlan
from ..report.report import Failure, LauncherAttempt, RunResult
from . import notifier
from .attempt_status import announce_attempt
from .checkpoints import CheckpointKeeper
from .launcher import Launcher
from .policy import RestartPolicy, backoff_for, classify_result, describe_failure, should_restart
from .prepare_steps import PrepareEnd, end_result, run_prepare
from .procs import selfproc
from .progress import PROGRESS_DIR_NAME, PROGRESS_DIR_VAR
from .recovery import Recovery
from .recovery_clock import RecoveryClock, progress_dirs

if TYPE_CHECKING:
    from ..report.failure_class import Classification
    from .hosts.messages import Cause

__all__ = ["Attempt", "AttemptLoop", "BackoffStop", "HostAlone", "RestartOutcome", "Step", "restart_report",
           "run_with_restarts"]

_BRIEF_TAIL = 10  # lines of an attempt's root-cause output kept in the report

RunFunction = Callable[..., RunResult]  # run_plan: (plan, base_env, **options) -> RunResult


class Attempt:
    """One start of the group: its number, its result, its failure class and whether it was restarted.

    A slotted class (a named tuple cannot have a field called ``index``); on several hosts ``restarted`` and
    ``cause`` are filled in when the coordinator decides (:mod:`.hosts.jobloop`).
    """

    __slots__ = ("cause", "classification", "index", "log_dir", "members", "restarted", "result", "world_size")

    def __init__(
        self, index: int, result: RunResult, classification: "Optional[Classification]", restarted: bool, log_dir: str
    ) -> None:
        self.index, self.result, self.classification = index, result, classification
        self.restarted, self.log_dir = restarted, log_dir
        self.cause: Optional[Cause] = None  # several hosts: the job's root cause, as the coordinator chose
        self.members: Optional[Tuple[int, ...]] = None  # elastic torchrun: the attempt's hosts
        self.world_size: Optional[int] = None  # elastic torchrun: its ranks

    def __repr__(self) -> str:
        return (f"Attempt(index={self.index}, result={self.result!r}, classification={self.classification!r}, "
                f"restarted={self.restarted}, log_dir={self.log_dir!r})")  # fmt: skip


class RestartOutcome(NamedTuple):
    """All attempts of a run; ``result`` is what the shim reports and exits with."""

    result: RunResult
    attempts: Tuple[Attempt, ...]
    policy: RestartPolicy
    stopped_in_backoff: Optional[int] = None  # the signal that ended a back-off
    hosts: Optional[Dict[str, Any]] = None  # several hosts: this host's place and the job's verdict
    job_class: "Optional[Classification]" = None  # several hosts: the class of the job's root cause
    recovery: Tuple[Recovery, ...] = ()  # the time to recover after each failed attempt (:mod:`.recovery`)

    @property
    def classification(self) -> "Optional[Classification]":
        """The class of the final failure (None on success)."""
        if self.result.exit_code == 0 and self.result.shim_signal is None:
            return None
        if self.job_class is not None:
            return self.job_class
        if self.stopped_in_backoff is not None:
            return classify_result(self.result)
        return self.attempts[-1].classification if self.attempts else None


class BackoffStop:
    """The stop signal that ends a wait between attempts at once (installed with
    :func:`.procs.selfproc.stop_signal_handlers`)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: Optional[int] = None

    def on_signal(self, signum: int, frame: object) -> None:
        del frame
        if self.signum is None:
            self.signum = signum
        self.event.set()

    def wait(self, seconds: float) -> Optional[int]:
        """Sleep ``seconds`` unless a stop signal comes; returns that signal."""
        self.event.wait(seconds)
        return self.signum


#: What comes after an attempt: the next attempt's number, or the outcome that ends the loop.
Step = Union[int, RestartOutcome]


class AttemptLoop:
    """The one attempt loop: runs attempt after attempt, each the same way, while :meth:`first` and :meth:`after`
    (who decides what comes next) say which attempt follows, or end it with the outcome.

    The template methods (like torch elastic's agent): :class:`HostAlone` decides on this host alone (the contract
    in the module's docstring); :class:`~.hosts.jobloop.Coordinated` does what the job's coordinator says.
    :meth:`attempt_plan`, :meth:`starting`, :meth:`run_options`, :meth:`begin` and :meth:`end` are hooks with
    defaults. Each attempt: its plan, its plan's notes said, ``attempt.json`` announced ``running``, the run.
    """

    def __init__(self, plan: LaunchPlan, base_env: Mapping[str, str], policy: RestartPolicy, run: RunFunction,
                 say: Callable[[str], None], launcher: Launcher,
                 plan_policy: Optional[RestartPolicy] = None,
                 checkpoints: Optional[CheckpointKeeper] = None) -> None:  # fmt: skip
        self.started = time.monotonic()
        self.checkpoints = checkpoints  # the checkpoint folder's keeper (None: no MALAUNCH_CHECKPOINT_DIR)
        self.plan, self.base_env, self.policy, self.run_one, self.say = plan, base_env, policy, run, say
        self.launcher = launcher
        self.plan_policy = plan_policy if plan_policy is not None else policy  # the policy attempts are planned with
        self.stop = BackoffStop()
        self.attempts: List[Attempt] = []
        self.limit = launcher.attempt_limit(plan, policy)
        self.names = {spec.name for spec in plan.processes} if launcher.starts_workers else set()
        self.announcing = launcher.announces_attempts(self.plan_policy)
        self.progress_dir = os.path.join(plan.log_dir, PROGRESS_DIR_NAME)  # every attempt's MALAUNCH_PROGRESS_DIR
        self.recovery = RecoveryClock(plan.log_dir, progress_dirs(plan.log_dir, base_env), say)

    def run(self) -> RestartOutcome:
        """Run attempts until the decider ends the loop; a stop signal between attempts ends it at once."""

        if self.checkpoints is not None:  # before begin(): no host's rank of this run has started
            self.checkpoints.clear_stale_parts()
        with selfproc.stop_signal_handlers(self.stop.on_signal):
            self.begin()
            try:
                step = self.first()
                while not isinstance(step, RestartOutcome):
                    attempt_plan = self.attempt_plan(step)
                    for note in attempt_plan.notes[len(self.plan.notes) :]:
                        self.say(note)
                    self.starting(step)
                    self.announce(step, "running")
                    env = self.attempt_env(step)
                    self.recovery.started(step)
                    options = self.run_options(step)
                    if self.launcher.restarts_workers(attempt_plan):  # its own restarts' times (recovery_clock.py)
                        options["on_round"] = functools.partial(self.recovery.launcher_rounds, step)
                    result = self.run_one(attempt_plan, env, **options)
                    self.recovery.ended(step, result)
                    step = self.after(step, result, attempt_plan.log_dir)
                return step._replace(recovery=tuple(self.recovery.finish()))
            finally:
                self.end()

    # -- who decides what comes next ----------------------------------------------------------------------------
    def first(self) -> Step:
        """The first attempt's number, or the outcome when there is none."""
        raise NotImplementedError

    def after(self, index: int, result: RunResult, log_dir: str) -> Step:
        """What follows attempt ``index``, which ran with ``result`` (its logs in ``log_dir``)."""
        raise NotImplementedError

    # -- hooks ------------------------------------------------------------------------------------------------
    def begin(self) -> None:
        """Before the first decision (the stop signal's handlers are installed)."""

    def end(self) -> None:
        """After the last, whatever happened."""

    def attempt_plan(self, index: int) -> LaunchPlan:
        """Attempt ``index``'s plan (the launcher's)."""
        return self.launcher.plan_attempt(self.plan, index, self.plan_policy)

    def starting(self, index: int) -> None:
        """Attempt ``index`` starts now (its notes said)."""

    def run_options(self, index: int) -> Dict[str, Any]:
        """Keyword arguments of the run function for attempt ``index``."""
        del index
        return {}

    # -- what every decider uses ----------------------------------------------------------------------------------
    def attempt_env(self, index: int) -> Mapping[str, str]:
        """Attempt ``index``'s environment: the base one, with the ranks' progress folder (:mod:`.progress`) and
        the checkpoint to resume from (:mod:`.checkpoints`)."""
        with contextlib.suppress(OSError):  # a folder that cannot be made costs the records, never the run
            os.makedirs(self.progress_dir, exist_ok=True)
        env = {**self.base_env, PROGRESS_DIR_VAR: self.progress_dir}
        if self.checkpoints is None:
            return env
        self.checkpoints.before(index)
        return self.checkpoints.env(env)

    def announce(self, attempt: int, state: str, waiting: "Optional[Dict[str, Any]]" = None) -> None:
        """Announce the attempt in ``<log dir>/attempt.json`` (:mod:`.attempt_status`) when the group may restart;
        ``waiting``: the lost host the hosts wait for (state ``waiting``)."""
        if self.announcing:
            announce_attempt(self.plan.log_dir, attempt, state, waiting)

    def record(self, index: int, result: RunResult, log_dir: str) -> "Optional[Classification]":
        """Record attempt ``index`` as run, not restarted yet (every attempt the launcher made inside it, too); its
        class."""
        if any(item.restarted for item in result.launcher_attempts):
            self.attempts.extend(self._launcher_attempts(result, log_dir))
        else:
            self.attempts.append(Attempt(index, result, classify_result(result, self.names), False, log_dir))
        return self.attempts[-1].classification

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def prepare(self, cancelled: Callable[[], bool] = lambda: False) -> PrepareEnd:
        """Run the plan's prepare steps (:mod:`.prepare_steps`), if any; a stop signal ends them."""
        return run_prepare(self.plan, self.base_env, self.say, lambda: self.stop.signum, cancelled)

    def unprepared(self, end: PrepareEnd) -> RestartOutcome:
        """The outcome of a job whose prepare steps did not succeed: no attempt ran, and none will (a step is
        the job's own setup: running it again cannot tell a typo from a flaky download; docs/recovery.md)."""
        result = end_result(end, self.elapsed())
        return RestartOutcome(result, tuple(self.attempts), self.policy, stopped_in_backoff=end.stopped,
                              job_class=classify_result(result))  # fmt: skip

    def _launcher_attempts(self, result: RunResult, log_dir: str) -> List[Attempt]:
        """One :class:`Attempt` per attempt the launcher made itself; the one not restarted is ``result``."""
        found: List[Attempt] = []
        first = len(self.attempts)
        for number, item in enumerate(result.launcher_attempts):
            one = result if not item.restarted else _attempt_result(item)
            kind = classify_result(one, self.names)
            found.append(Attempt(first + number, one, kind, item.restarted, item.log_dir or log_dir))
        return found


class HostAlone(AttemptLoop):
    """This host decides alone (one host, or a coordinator not wanted): the contract in the module's docstring."""

    def first(self) -> Step:
        end = self.prepare()
        return 0 if end.ok else self.unprepared(end)

    def after(self, index: int, result: RunResult, log_dir: str) -> Step:
        if not self._judge(index, result, log_dir):
            self.announce(index, "ended")
            final = result._replace(duration=self.elapsed())  # the last run's: the one that ended the job
            return RestartOutcome(final, tuple(self.attempts), self.policy)
        notifier.attempt_over(self.attempts)
        self.announce(index, "backoff")
        signum = self.stop.wait(self._say_restart(index, result))
        if signum is not None:
            self.say(f"received {signal.Signals(signum).name} during the back-off: stopping, no further attempt")
            final = RunResult(128 + signum, None, signum, self.elapsed())
            self.announce(index, "ended")
            return RestartOutcome(final, tuple(self.attempts), self.policy, stopped_in_backoff=signum)
        return index + 1

    def _judge(self, index: int, result: RunResult, log_dir: str) -> bool:
        """Record attempt ``index``'s result; whether the group starts again."""
        if any(item.restarted for item in result.launcher_attempts):
            self.attempts.extend(self._launcher_attempts(result, log_dir))
            return False
        classification = classify_result(result, self.names)
        again = (
            classification is not None
            and result.shim_signal is None
            and self.stop.signum is None
            and index + 1 < self.limit
            and should_restart(self.policy, classification, result.exit_code)
        )
        self.attempts.append(Attempt(index, result, classification, again, log_dir))
        return again

    def _say_restart(self, index: int, result: RunResult) -> float:
        """Say why attempt ``index`` is restarted; returns the back-off before the next one."""
        classification = self.attempts[-1].classification
        kind = classification.kind if classification is not None else "unknown"
        pause = backoff_for(self.policy, index + 1)
        self.say(f"attempt {index} failed: {describe_failure(result)}")
        self.say(f"attempt {index} failed ({kind}): restart {index + 1} of {self.policy.max_restarts} in {pause:g}s")
        return pause


def run_with_restarts(
    plan: LaunchPlan,
    base_env: Mapping[str, str],
    policy: RestartPolicy,
    run: RunFunction,
    say: Callable[[str], None],
    launcher: Optional[Launcher] = None,
    checkpoints: Optional[CheckpointKeeper] = None,
) -> RestartOutcome:
    """Run ``plan`` with ``run`` (``run_plan``), restarting the group as ``policy`` and the plan's ``launcher``
    allow (None: the defaults, every process a rank); ``checkpoints``: the checkpoint folder's keeper."""
    return HostAlone(plan, base_env, policy, run, say, launcher if launcher is not None else Launcher(),
                     checkpoints=checkpoints).run()  # fmt: skip


def _attempt_result(item: LauncherAttempt) -> RunResult:
    code = item.root_cause.exit_code if item.root_cause is not None else 0
    return RunResult(code, item.root_cause, None, item.duration)


def _failure_brief(failure: Optional[Failure]) -> Optional[Dict[str, Any]]:
    if failure is None:
        return None
    return {
        "name": failure.name,
        "rank": failure.rank,
        "host": failure.host,
        "exit_code": failure.exit_code,
        "signal": failure.signal,
        "log_file": failure.log_file,
        "message": failure.message,
        "tail": list(failure.tail[-_BRIEF_TAIL:]),
        # another host's failure or loss ended this one (its tail's line names that host); which of this host's own
        # facts (exit, watch, summary) named a root cause is left out: it can race (tests/entrypoint/golden)
        **({"source": failure.source} if failure.source in ("peer", "lost") else {}),
    }


def restart_report(outcome: RestartOutcome) -> Dict[str, Any]:
    """Report fields the restart loop adds: the final failure's class and every attempt's root cause (several
    hosts: also ``hosts``, and each attempt's ``job_cause``, the same on every host)."""
    report = _attempts_report(outcome)
    if outcome.recovery:
        report["recovery"] = [record.to_json() for record in outcome.recovery]
    if outcome.hosts is not None:
        report["hosts"] = outcome.hosts
        for entry, attempt in zip(report["attempts"], outcome.attempts):
            entry["job_cause"] = attempt.cause.to_wire() if attempt.cause is not None else None
            if attempt.members is not None:
                entry.update(members=list(attempt.members), world_size=attempt.world_size)
    return report


def _attempts_report(outcome: RestartOutcome) -> Dict[str, Any]:
    final = outcome.classification
    return {
        "failure_class": final.to_json() if final is not None else None,
        "restarts": outcome.policy.to_json(),
        "stopped_in_backoff": outcome.stopped_in_backoff,
        "attempts": [
            {
                "attempt": attempt.index,
                "exit_code": attempt.result.exit_code,
                "duration": round(attempt.result.duration, 3),
                "failure_class": attempt.classification.kind if attempt.classification is not None else None,
                "retryable": attempt.classification.retryable if attempt.classification is not None else None,
                "restarted": attempt.restarted,
                "log_dir": attempt.log_dir,
                "root_cause": _failure_brief(attempt.result.root_cause),
                **({"hang": list(attempt.result.hang)} if attempt.result.hang else {}),
            }
            for attempt in outcome.attempts
        ],
    }
