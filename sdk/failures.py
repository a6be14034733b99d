"""Failure classes for a failed job, as every backend reports them (``ma-submit status --output json``).

The classes themselves live in one place, the shim's :mod:`malaunch.entrypoint.failure_class`; this module is
what the backends call:

- :func:`classify_job_failure` with the job's exit code and the last lines of its log (ModelArts and Volcano
  backends, which see no shim report);
- :func:`failure_from_report` with a shim's JSON report, which already names the class of its root cause
  (the local backend reads ``hosts/<i>/report.json``), falling back to the exit code and a log tail.

Both return the JSON form shown under ``failure_class`` in a status: ``{"class", "retryable", "reason",
"description"}``.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Dict, Mapping, Optional, Sequence

from malaunch.entrypoint.failure_class import CLASSES, Classification, classify_exit

__all__ = ["CLASSES", "Classification", "classify_job_failure", "failure_from_report", "log_tail"]

_TAIL_LINES = 200


def classify_job_failure(exit_code: int, log_lines: Sequence[str] = ()) -> Dict[str, Any]:
    """The class of a job that ended with ``exit_code`` (its shim's code) and printed ``log_lines`` last."""
    return classify_exit(exit_code, log_lines[-_TAIL_LINES:]).to_json()


def log_tail(path: str, lines: int = _TAIL_LINES) -> Sequence[str]:
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
