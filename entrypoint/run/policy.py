"""The restart policy: how often and on what the group starts again, and how a failed attempt is judged. Pure.

- :class:`RestartPolicy` is read from ``MA_MAX_RESTARTS``, ``MALAUNCH_RESTART_ON`` and ``MALAUNCH_RESTART_BACKOFF``
  by the contract (:func:`~..contract.config.parse_shim_config`; ``docs/entrypoint.md`` has them);
- :func:`classify_result` gives an attempt's failure its class (:mod:`..report.failure_class`);
- :func:`should_restart` applies ``restart_on`` to that class; :func:`backoff_for` is the pause before a restart.
"""

from typing import TYPE_CHECKING, Collection, Optional

from ..contract import VARIABLES
from ..contract.config import DEFAULT_BACKOFF, RestartPolicy
from ..report.failure_class import classify_failure
from ..report.report import RunResult, describe_exit, describe_failure_exit

if TYPE_CHECKING:
    from ..report.failure_class import Classification

__all__ = [
    "DEFAULT_BACKOFF",
    "MAX_BACKOFF",
    "RESTART_ON_CHOICES",
    "RestartPolicy",
    "backoff_for",
    "classify_result",
    "describe_failure",
    "should_restart",
]

RESTART_ON_CHOICES = VARIABLES["MALAUNCH_RESTART_ON"].choices
MAX_BACKOFF = 30.0


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
        f"({describe_failure_exit(failure)}); log {failure.log_file}"
    )
    return "\n".join([text, *(f"    | {line}" for line in failure.tail[-lines:])])


def classify_result(result: RunResult, launcher_names: Collection[str] = ()) -> "Optional[Classification]":
    """The class of a run's failure; None when it succeeded. ``launcher_names``: the plan's processes that are
    launchers (they do not run the user's script: a failure of theirs is the launcher's)."""
    if result.exit_code == 0 and result.shim_signal is None:
        return None

    failure = result.root_cause
    if failure is None:
        return classify_failure(result.exit_code, stopped=result.shim_signal is not None, origin="shim")
    origin = "launcher" if failure.rank is None and failure.name in launcher_names else "rank"
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
