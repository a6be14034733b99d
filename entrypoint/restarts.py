"""Group restarts: run a launch plan again, as a whole, after a failure a restart can help with.

The loop wraps :func:`~malaunch.entrypoint.supervisor.run_plan`; everything it decides is pure:

- :func:`parse_restart_policy` reads ``MA_MAX_RESTARTS``, ``MALAUNCH_RESTART_ON`` and
  ``MALAUNCH_RESTART_BACKOFF`` from a ``Mapping`` (``docs/entrypoint.md`` has them in the contract table);
- :func:`plan_attempt` turns the plan into attempt *K*'s plan: logs under ``<log dir>/attempt-K/``,
  ``TORCHELASTIC_RESTART_COUNT=K`` and ``TORCHELASTIC_MAX_RESTARTS=N`` in every process's environment. torchrun
  is driven the same way: each attempt is a torchrun of its own with ``--max_restarts=0``, so torchrun can never
  restart what ``restart_on`` refuses, however late the shim sees a death; its workers still see the real
  counters (:mod:`._torchrun_stub`). Only a ``--max_restarts`` the user put in
  ``MA_EXTRA_TORCHRUN_PARAMS`` lets torchrun restart by itself: then the loop runs it once and the supervisor
  applies ``restart_on`` to every torchrun attempt as well as it can (:mod:`._attempt_gate`);
- :func:`should_restart` applies ``restart_on`` to an attempt's :class:`Classification`.

Contract of :func:`run_with_restarts`:

1. Attempt 0 runs the plan; after a failure whose class ``restart_on`` accepts, and while fewer than
   ``max_restarts`` restarts were made, the whole group (already torn down by ``run_plan``) starts again after
   the back-off (``backoff * 2**(K-1)`` seconds, at most 30 or ``backoff`` if longer).
2. A signal to the shim during a run ends it as ``run_plan`` does (128+S, no restart); SIGTERM, SIGINT or SIGHUP
   during a back-off ends everything at once with 128+S.
3. The result is the last attempt's, with the whole duration; every attempt's root cause and class is kept in
   :class:`RestartOutcome` and goes into the JSON report (:func:`restart_report`). Under torchrun every
   attempt torchrun made is one :class:`Attempt` (from ``RunResult.launcher_attempts``).
"""


import os
import signal
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple, Union

from ._torchrun_stub import attempt_argv
from .contract import VARIABLES, parse_codes, parse_int, parse_seconds
from .ms_recovery import is_recovery_plan
from .plan import LaunchPlan, ProcessSpec
from .report import Failure, LauncherAttempt, RunResult, describe_exit

if TYPE_CHECKING:  # classified only after a failure: imported then (its patterns cost start-up time)
    from .failure_class import Classification

__all__ = [
    "DEFAULT_BACKOFF",
    "MAX_BACKOFF",
    "RESTART_ON_CHOICES",
    "Attempt",
    "RestartOutcome",
    "RestartPolicy",
    "backoff_for",
    "classify_result",
    "describe_failure",
    "parse_restart_policy",
    "plan_attempt",
    "restart_report",
    "run_with_restarts",
    "should_restart",
]

RESTART_ON_CHOICES = VARIABLES["MALAUNCH_RESTART_ON"].choices
DEFAULT_BACKOFF = float(VARIABLES["MALAUNCH_RESTART_BACKOFF"].default or 0.0)
MAX_BACKOFF = 30.0
_BRIEF_TAIL = 10  # lines of an attempt's root-cause output kept in the report

RunFunction = Callable[[LaunchPlan, Mapping[str, str]], RunResult]


class RestartPolicy(NamedTuple):
    """How often and on what the group is started again. ``restart_on``: a choice word or exit codes."""

    max_restarts: int = 0
    restart_on: Union[str, Tuple[int, ...]] = "retryable"
    backoff: float = DEFAULT_BACKOFF

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready form."""
        on = self.restart_on if isinstance(self.restart_on, str) else list(self.restart_on)
        return {"max_restarts": self.max_restarts, "restart_on": on, "backoff": self.backoff}


def parse_restart_policy(environ: Mapping[str, str]) -> RestartPolicy:
    """The restart policy from the environment. Pure.

    Raises:
        ConfigError: a variable has an invalid value.
    """
    max_restarts = parse_int(environ, "MA_MAX_RESTARTS")  # the contract's rules: ASCII digits, 0-1000
    restart_on = parse_codes(environ, "MALAUNCH_RESTART_ON")
    return RestartPolicy(max_restarts, restart_on, parse_seconds(environ, "MALAUNCH_RESTART_BACKOFF"))


def backoff_for(policy: RestartPolicy, restart: int) -> float:
    """Seconds to wait before restart number ``restart`` (1-based): the back-off, doubling each time up to
    :data:`MAX_BACKOFF` (or the back-off itself when that is longer)."""
    return min(policy.backoff * 2.0 ** max(restart - 1, 0), max(policy.backoff, MAX_BACKOFF))


def describe_failure(result: RunResult, lines: int = 5) -> str:
    """A short account of a failed attempt (the job goes on): who, how, where its log is, its last lines."""
    failure = result.root_cause
    if failure is None:
        return f"exit code {result.exit_code} ({describe_exit(result.exit_code, None)})"
    who = f"rank {failure.rank}" if failure.rank is not None else failure.name
    text = (
        f"{who} on host {failure.host} exited with {failure.exit_code} "
        f"({describe_exit(failure.exit_code, failure.signal)}); log {failure.log_file}"
    )
    return "\n".join([text, *(f"    | {line}" for line in failure.tail[-lines:])])


def classify_result(result: RunResult) -> Optional["Classification"]:
    """The class of a run's failure; None when it succeeded."""
    if result.exit_code == 0 and result.shim_signal is None:
        return None
    from .failure_class import classify_failure

    failure = result.root_cause
    if failure is None:
        return classify_failure(result.exit_code, stopped=result.shim_signal is not None, origin="shim")
    # The launcher processes themselves (torchrun, msrun) are the only ones that do not run the user's script.
    origin = "launcher" if failure.rank is None and failure.name in ("torchrun", "msrun") else "rank"
    return classify_failure(failure.exit_code, failure.tail, signal=failure.signal, origin=origin)


def should_restart(policy: RestartPolicy, classification: "Classification", exit_code: int) -> bool:
    """Whether ``restart_on`` accepts this failure (the restart budget is checked by the caller)."""
    if classification.kind == "stopped":
        return False
    on = policy.restart_on
    if on == "always":
        return True
    if on == "never":
        return False
    if on == "retryable":
        return classification.retryable
    return exit_code in on


def _reroot(path: str, root: str, attempt_dir: str) -> str:
    prefix = root.rstrip(os.sep) + os.sep
    return os.path.join(attempt_dir, path[len(prefix) :]) if path.startswith(prefix) else path


def _reroot_arg(token: str, root: str, attempt_dir: str) -> str:
    if token.startswith("--") and "=" in token:
        flag, value = token.split("=", 1)
        return f"{flag}={_reroot(value, root, attempt_dir)}"
    return token


def plan_attempt(plan: LaunchPlan, attempt: int, policy: RestartPolicy) -> LaunchPlan:
    """Attempt ``attempt``'s plan (0-based). Pure. Without restarts the plan is returned unchanged."""
    if policy.max_restarts <= 0 or is_recovery_plan(plan):  # recovery relaunches single processes instead
        return plan
    if _torchrun_restarts_itself(plan):
        return _torchrun_attempt(plan, policy)
    counters = {  # under torchrun, ._torchrun_stub puts them back into each worker's environment
        "TORCHELASTIC_RESTART_COUNT": str(attempt),
        "TORCHELASTIC_MAX_RESTARTS": str(policy.max_restarts),
        "MALAUNCH_ATTEMPT": str(attempt),
    }
    root = plan.log_dir
    attempt_dir = os.path.join(root, f"attempt-{attempt}")
    processes = tuple(
        spec._replace(
            argv=_attempt_argv(plan, _reroot_argv(spec, root, attempt_dir), attempt, policy.max_restarts),
            env={**_reroot_env(plan, spec.env, root, attempt_dir), **counters},
            log_file=_reroot(spec.log_file, root, attempt_dir),
        )
        for spec in plan.processes
    )
    rank_logs = {rank: _reroot(path, root, attempt_dir) for rank, path in plan.rank_logs.items()}
    note = f"attempt {attempt} of at most {policy.max_restarts + 1}: logs in {attempt_dir}"
    return plan._replace(processes=processes, rank_logs=rank_logs, log_dir=attempt_dir, notes=(*plan.notes, note))


def _attempt_argv(plan: LaunchPlan, spec: ProcessSpec, attempt: int, most: int) -> Tuple[str, ...]:
    return attempt_argv(spec.argv, spec.script_at, attempt, most) if plan.method == "torchrun" else spec.argv


def _reroot_argv(spec: ProcessSpec, root: str, attempt_dir: str) -> ProcessSpec:
    return spec._replace(argv=tuple(_reroot_arg(token, root, attempt_dir) for token in spec.argv))


def _reroot_env(plan: LaunchPlan, env: Mapping[str, str], root: str, attempt_dir: str) -> Dict[str, str]:
    """torchrun's own error file goes into the attempt's folder too (other processes' variables are kept)."""
    if plan.method != "torchrun":
        return dict(env)
    return {key: _reroot(value, root, attempt_dir) for key, value in env.items()}


def _torchrun_restarts_itself(plan: LaunchPlan) -> bool:
    """The user gave torchrun ``--max_restarts`` (``MA_EXTRA_TORCHRUN_PARAMS``): the plan does not watch its
    workers' failures (:mod:`.launchers`), torchrun restarts them."""
    return plan.method == "torchrun" and not plan.watch_workers


def _torchrun_attempt(plan: LaunchPlan, policy: RestartPolicy) -> LaunchPlan:
    """torchrun restarts its worker group itself (the user's ``--max_restarts``, later on the command line,
    wins over the ``--max_restarts=N`` put right after the module name)."""
    restarts = 0 if policy.restart_on == "never" else policy.max_restarts
    processes: List[ProcessSpec] = []
    for spec in plan.processes:
        argv = list(spec.argv)
        if spec.name == "torchrun" and len(argv) >= 3 and argv[1] == "-m":
            argv.insert(3, f"--max_restarts={restarts}")
        processes.append(spec._replace(argv=tuple(argv)))
    note = "torchrun restarts the worker group itself (--max_restarts in MA_EXTRA_TORCHRUN_PARAMS)"
    # ``always``: torchrun's own rule already; ``never``: no restarts to judge
    restart_on = None if policy.restart_on in ("always", "never") else policy.restart_on
    return plan._replace(processes=tuple(processes), restart_on=restart_on, notes=(*plan.notes, note))


def _attempts_of(plan: LaunchPlan, policy: RestartPolicy) -> int:
    """How many times the loop may start the plan (once when torchrun restarts by itself)."""
    return 1 if _torchrun_restarts_itself(plan) else policy.max_restarts + 1


class Attempt:
    """One start of the group: its number, its result, its failure class and whether it was restarted.

    A slotted class (a named tuple cannot have a field called ``index``); never changed once made.
    """

    __slots__ = ("classification", "index", "log_dir", "restarted", "result")

    def __init__(
        self, index: int, result: RunResult, classification: Optional["Classification"], restarted: bool, log_dir: str
    ) -> None:
        self.index, self.result, self.classification = index, result, classification
        self.restarted, self.log_dir = restarted, log_dir

    def __repr__(self) -> str:
        return (f"Attempt(index={self.index}, result={self.result!r}, classification={self.classification!r}, "
                f"restarted={self.restarted}, log_dir={self.log_dir!r})")  # fmt: skip


class RestartOutcome(NamedTuple):
    """All attempts of a run; ``result`` is what the shim reports and exits with."""

    result: RunResult
    attempts: Tuple[Attempt, ...]
    policy: RestartPolicy
    stopped_in_backoff: Optional[int] = None  # the signal that ended a back-off

    @property
    def classification(self) -> Optional["Classification"]:
        """The class of the final failure (None on success)."""
        if self.result.exit_code == 0 and self.result.shim_signal is None:
            return None
        if self.stopped_in_backoff is not None:
            return classify_result(self.result)
        return self.attempts[-1].classification if self.attempts else None


class _BackoffStop:
    """The stop signal that ends a back-off at once (installed with :func:`proctree.stop_signal_handlers`)."""

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
    """Announces each attempt for the peers (:mod:`.peers`) when the group may restart; from the first
    announcement on, this process ignores a peer's restart signal outside ``run_plan`` (which handles it)."""

    def __init__(self, plan: LaunchPlan, policy: RestartPolicy) -> None:
        self.log_dir = plan.log_dir
        self.active = policy.max_restarts > 0 and not is_recovery_plan(plan)
        if self.active and threading.current_thread() is threading.main_thread():
            from . import peers

            peers.ignore_peer_restarts()  # for good: a late signal must never kill the shim as it ends

    def __call__(self, attempt: int, state: str) -> None:
        if self.active:
            from . import peers

            peers.announce_attempt(self.log_dir, attempt, state)


def run_with_restarts(
    plan: LaunchPlan,
    base_env: Mapping[str, str],
    policy: RestartPolicy,
    run: RunFunction,
    say: Callable[[str], None],
) -> RestartOutcome:
    """Run ``plan`` with ``run`` (``run_plan``), restarting the group as ``policy`` allows."""
    from . import proctree  # Linux only (fcntl): imported when a plan runs, so other hosts get the refusal line

    started = time.monotonic()
    attempts: List[Attempt] = []
    stop = _BackoffStop()
    announce = _Announcer(plan, policy)
    with proctree.stop_signal_handlers(stop.on_signal):
        limit = _attempts_of(plan, policy)
        for index in range(limit):
            attempt_plan = plan_attempt(plan, index, policy)
            for note in attempt_plan.notes[len(plan.notes) :]:
                say(note)
            announce(index, "running")
            result = run(attempt_plan, base_env)
            if len(result.launcher_attempts) > 1:
                attempts.extend(_launcher_attempts(result, attempt_plan.log_dir, len(attempts)))
                break
            classification = classify_result(result)
            again = (
                classification is not None
                and result.shim_signal is None
                and stop.signum is None
                and index + 1 < limit
                and should_restart(policy, classification, result.exit_code)
            )
            attempts.append(Attempt(index, result, classification, again, attempt_plan.log_dir))
            if not again or classification is None:
                break
            announce(index, "backoff")  # the peers still in this attempt end it too (peers.py)
            pause = backoff_for(policy, index + 1)
            say(f"attempt {index} failed: {describe_failure(result)}")
            say(
                f"attempt {index} failed ({classification.kind}): restart {index + 1} of {policy.max_restarts} "
                f"in {pause:g}s"
            )
            signum = stop.wait(pause)
            if signum is not None:
                say(f"received {signal.Signals(signum).name} during the back-off: stopping, no further attempt")
                final = RunResult(128 + signum, None, signum, time.monotonic() - started)
                announce(index, "ended")
                return RestartOutcome(final, tuple(attempts), policy, stopped_in_backoff=signum)
        announce(index, "ended")
        last = attempts[-1].result
        final = last._replace(duration=time.monotonic() - started)
        return RestartOutcome(final, tuple(attempts), policy)


def _launcher_attempts(result: RunResult, log_dir: str, first: int) -> List[Attempt]:
    """One :class:`Attempt` per attempt the launcher (torchrun) made itself; the last one is ``result``."""
    found: List[Attempt] = []
    for number, item in enumerate(result.launcher_attempts):
        last = number == len(result.launcher_attempts) - 1
        one = result if last else _attempt_result(item)
        found.append(Attempt(first + number, one, classify_result(one), not last, item.log_dir or log_dir))
    return found


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
    """Report fields the restart loop adds: the final failure's class and every attempt's root cause."""
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
            }
            for attempt in outcome.attempts
        ],
    }
