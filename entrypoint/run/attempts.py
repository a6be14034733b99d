"""The one attempt loop: run a launch plan again, as a whole, after a failure a restart can help with.

The loop wraps a run function (:func:`~.supervisor.run_plan`) and asks the plan's :class:`~.launcher.Launcher`
what differs per method: attempt *K*'s plan (:meth:`~.launcher.Launcher.plan_attempt`) and how many attempts
it may make (:meth:`~.launcher.Launcher.attempt_limit`: one when the launcher restarts its workers itself).
What happens inside an attempt is the launcher's too: torchrun's own restarts judged by its gate, MindSpore's
relaunch of one process (:meth:`~.launcher.Launcher.relaunch`); each of those shows here as an attempt of its
own (``RunResult.launcher_attempts``). The policy is :mod:`.policy`'s.

Contract of :func:`run_with_restarts`:

1. Attempt 0 runs the plan; after a failure whose class ``restart_on`` accepts, and while fewer than
   ``max_restarts`` restarts were made, the whole group (already torn down by ``run_plan``) starts again after
   the back-off (``backoff * 2**(K-1)`` seconds, at most 30 or ``backoff`` if longer).
2. A signal to the shim during a run ends it as ``run_plan`` does (128+S, no restart); SIGTERM, SIGINT or SIGHUP
   during a back-off ends everything at once with 128+S.
3. The result is the last attempt's, with the whole duration; every attempt's root cause and class is kept in
   :class:`RestartOutcome` and goes into the JSON report (:func:`restart_report`). Every attempt a launcher
   made inside one run (torchrun's own, a relaunched process) is one :class:`Attempt`.
"""

import signal
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

from ..plan.launch_plan import LaunchPlan
from ..report.report import Failure, LauncherAttempt, RunResult
from . import notify
from .launcher import Launcher
from .policy import RestartPolicy, backoff_for, classify_result, describe_failure, should_restart

if TYPE_CHECKING:
    from ..report.failure_class import Classification

__all__ = ["Attempt", "RestartOutcome", "restart_report", "run_with_restarts"]

_BRIEF_TAIL = 10  # lines of an attempt's root-cause output kept in the report

RunFunction = Callable[[LaunchPlan, Mapping[str, str]], RunResult]


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
        self.cause: Optional[Dict[str, Any]] = None  # several hosts: the job's root cause, as the coordinator chose
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


class _BackoffStop:
    """The stop signal that ends a back-off at once (installed with :func:`.procs.selfproc.stop_signal_handlers`)."""

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


class _Announcer:
    """Announces each attempt in ``<log dir>/attempt.json`` (:mod:`.attempt_status`) when the group may restart."""

    def __init__(self, plan: LaunchPlan, active: bool) -> None:
        self.log_dir = plan.log_dir
        self.active = active

    def __call__(self, attempt: int, state: str) -> None:
        if self.active:
            from .attempt_status import announce_attempt

            announce_attempt(self.log_dir, attempt, state)


class _Loop:
    """One :func:`run_with_restarts` call: its attempts so far and how they were judged."""

    def __init__(self, plan: LaunchPlan, policy: RestartPolicy, launcher: Launcher, say: Callable[[str], None]):
        self.plan, self.policy, self.launcher, self.say = plan, policy, launcher, say
        self.attempts: List[Attempt] = []
        self.limit = launcher.attempt_limit(plan, policy)
        self.names = {spec.name for spec in plan.processes} if launcher.starts_workers else set()

    def judge(self, index: int, result: RunResult, log_dir: str, stopping: bool) -> bool:
        """Record attempt ``index``'s result; whether the group starts again."""
        if any(item.restarted for item in result.launcher_attempts):
            self.attempts.extend(self._launcher_attempts(result, log_dir))
            return False
        classification = classify_result(result, self.names)
        again = (
            classification is not None
            and result.shim_signal is None
            and not stopping
            and index + 1 < self.limit
            and should_restart(self.policy, classification, result.exit_code)
        )
        self.attempts.append(Attempt(index, result, classification, again, log_dir))
        return again

    def _launcher_attempts(self, result: RunResult, log_dir: str) -> List[Attempt]:
        """One :class:`Attempt` per attempt the launcher made itself; the one not restarted is ``result``."""
        found: List[Attempt] = []
        first = len(self.attempts)
        for number, item in enumerate(result.launcher_attempts):
            one = result if not item.restarted else _attempt_result(item)
            kind = classify_result(one, self.names)
            found.append(Attempt(first + number, one, kind, item.restarted, item.log_dir or log_dir))
        return found

    def record(self, index: int, result: RunResult, log_dir: str) -> "Optional[Classification]":
        """Record attempt ``index`` as run (several hosts: the coordinator decides what follows); its class."""
        if any(item.restarted for item in result.launcher_attempts):
            self.attempts.extend(self._launcher_attempts(result, log_dir))
        else:
            self.attempts.append(Attempt(index, result, classify_result(result, self.names), False, log_dir))
        return self.attempts[-1].classification

    def say_restart(self, index: int, result: RunResult) -> float:
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
) -> RestartOutcome:
    """Run ``plan`` with ``run`` (``run_plan``), restarting the group as ``policy`` and the plan's ``launcher``
    allow (None: the defaults, every process a rank)."""
    from .procs import selfproc  # Linux only (fcntl): imported when a plan runs, so other hosts get the refusal line

    started = time.monotonic()
    launcher = launcher if launcher is not None else Launcher()
    stop = _BackoffStop()
    loop = _Loop(plan, policy, launcher, say)
    announce = _Announcer(plan, launcher.announces_attempts(policy))
    index = 0
    with selfproc.stop_signal_handlers(stop.on_signal):
        for index in range(loop.limit):
            attempt_plan = launcher.plan_attempt(plan, index, policy)
            for note in attempt_plan.notes[len(plan.notes) :]:
                say(note)
            announce(index, "running")
            result = run(attempt_plan, base_env)
            if not loop.judge(index, result, attempt_plan.log_dir, stop.signum is not None):
                break
            notify.attempt_over(loop.attempts)
            announce(index, "backoff")
            signum = stop.wait(loop.say_restart(index, result))
            if signum is not None:
                say(f"received {signal.Signals(signum).name} during the back-off: stopping, no further attempt")
                final = RunResult(128 + signum, None, signum, time.monotonic() - started)
                announce(index, "ended")
                return RestartOutcome(final, tuple(loop.attempts), policy, stopped_in_backoff=signum)
        announce(index, "ended")
        final = result._replace(duration=time.monotonic() - started)  # the last run's: the one that ended the job
        return RestartOutcome(final, tuple(loop.attempts), policy)


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
    }


def restart_report(outcome: RestartOutcome) -> Dict[str, Any]:
    """Report fields the restart loop adds: the final failure's class and every attempt's root cause (several
    hosts: also ``hosts``, and each attempt's ``job_cause``, the same on every host)."""
    report = _attempts_report(outcome)
    if outcome.hosts is not None:
        report["hosts"] = outcome.hosts
        for entry, attempt in zip(report["attempts"], outcome.attempts):
            entry["job_cause"] = attempt.cause
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
