"""The restart policy: how often and on what the group starts again, and how a failed attempt is judged. Pure.

- :func:`parse_restart_policy` reads ``MA_MAX_RESTARTS``, ``MALAUNCH_RESTART_ON`` and
  ``MALAUNCH_RESTART_BACKOFF`` through the contract table (``docs/entrypoint.md`` has them);
- :func:`classify_result` gives an attempt's failure its class (:mod:`..report.failure_class`);
- :func:`should_restart` applies ``restart_on`` to that class; :func:`backoff_for` is the pause before a restart.
"""

from typing import TYPE_CHECKING, Any, Collection, Dict, Mapping, NamedTuple, Optional, Tuple, Union

from ..contract import VARIABLES, parse_codes, parse_int, parse_seconds
from ..report.report import RunResult, describe_exit

if TYPE_CHECKING:  # classified only after a failure: imported then (its patterns cost start-up time)
    from ..report.failure_class import Classification

__all__ = [
    "DEFAULT_BACKOFF",
    "MAX_BACKOFF",
    "RESTART_ON_CHOICES",
    "RestartPolicy",
    "backoff_for",
    "classify_result",
    "describe_failure",
    "parse_restart_policy",
    "should_restart",
]

RESTART_ON_CHOICES = VARIABLES["MALAUNCH_RESTART_ON"].choices
DEFAULT_BACKOFF = float(VARIABLES["MALAUNCH_RESTART_BACKOFF"].default or 0.0)
MAX_BACKOFF = 30.0


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


def classify_result(result: RunResult, launcher_names: Collection[str] = ()) -> "Optional[Classification]":
    """The class of a run's failure; None when it succeeded. ``launcher_names``: the plan's processes that are
    launchers (they do not run the user's script: a failure of theirs is the launcher's)."""
    if result.exit_code == 0 and result.shim_signal is None:
        return None
    from ..report.failure_class import classify_failure

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
