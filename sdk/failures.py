"""Failure classes for a failed job, as every backend reports them (``ma-submit status --output json``).

The classes themselves live in one place, the shim's :mod:`malaunch.entrypoint.report.failure_class`; this module is
what the backends call:

- :func:`classify_job_failure` with the job's exit code and the last lines of its log (ModelArts and Volcano
  backends, which see no shim report);
- :func:`failure_from_report` with a shim's JSON report, which already names the class of its root cause
  (the local backend reads ``hosts/<i>/report.json``), falling back to the exit code and a log tail;
- :func:`failure_from_log` with the failed host's exit code and log tail, as the cloud backends see them
  (ModelArts: the failing task's log; Volcano: the failed pod's log). The shim prints its verdict there
  (``[ma-entrypoint] failure class: user_error (not retryable): ...``); that verdict wins, because the shim
  knew whether its exit code was a rank's own (an exit 2 from the user's script is the user's error, an exit
  2 of the shim itself is launcher misuse). Without it the exit code and the log decide.

Both return the JSON form shown under ``failure_class`` in a status: ``{"class", "retryable", "reason",
"description"}``.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any, Dict, Mapping, Optional, Sequence

from malaunch.entrypoint.public import CLASSES, RETRYABLE, SIGNAL, Classification, classify_exit, signal_in_any_code

__all__ = [
    "CLASSES",
    "TAIL_LINES",
    "Classification",
    "classify_job_failure",
    "failure_from_log",
    "failure_from_report",
    "log_tail",
    "shim_verdict",
]

#: How many of a log's last lines the classes are decided from.
TAIL_LINES = 200
# What the shim prints last on a failure (malaunch.entrypoint.main): its own line (``[ma-entrypoint] ``), or the
# same line with its host named in the prefix (``[host 1 ma-entrypoint] ``, backends.lineprefix).
_VERDICT = re.compile(r"[\[ ]ma-entrypoint\] failure class: ([a-z_]+) \((?:not )?retryable\)")


def classify_job_failure(exit_code: int, log_lines: Sequence[str] = ()) -> Dict[str, Any]:
    """The class of a job that ended with ``exit_code`` (its shim's code) and printed ``log_lines`` last."""
    return classify_exit(exit_code, log_lines[-TAIL_LINES:]).to_json()


def log_tail(path: str, lines: int = TAIL_LINES) -> Sequence[str]:
    """The last ``lines`` lines of a log file (empty when it cannot be read)."""
    try:
        with open(path, "rb") as handle:
            kept = deque(handle, maxlen=lines)
    except OSError:
        return ()
    return tuple(raw.rstrip(b"\r\n").decode("utf-8", errors="replace") for raw in kept)


def failure_from_report(
    report: Optional[Mapping[str, Any]], exit_code: int, console_log: Optional[str] = None
) -> Dict[str, Any]:
    """The class from a shim report's ``failure_class`` when it has one, else from the exit code and log."""
    if report is not None:
        found = report.get("failure_class")
        if isinstance(found, Mapping) and isinstance(found.get("class"), str) and found["class"] in CLASSES:
            return dict(found)
    return classify_job_failure(exit_code, log_tail(console_log) if console_log else ())


def shim_verdict(log_lines: Sequence[str]) -> Optional[str]:
    """The class the shim printed last in ``log_lines`` (its ``failure class:`` line), or ``None``."""
    for line in reversed(log_lines):
        match = _VERDICT.search(line)
        if match and match.group(1) in CLASSES:
            return match.group(1)
    return None


def failure_from_log(exit_code: int, log_lines: Sequence[str] = ()) -> Dict[str, Any]:
    """The class of a job whose failed host ended with ``exit_code`` after printing ``log_lines`` (see above)."""
    tail = list(log_lines[-TAIL_LINES:])
    kind = shim_verdict(tail)
    if kind is None:
        return classify_job_failure(exit_code, tail)
    seen = signal_in_any_code(exit_code, None) if kind == SIGNAL else None  # the rank's own code, as a signal
    return Classification(kind, kind in RETRYABLE, f"the shim's verdict (exit code {exit_code})", seen).to_json()
