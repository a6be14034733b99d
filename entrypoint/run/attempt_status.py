"""Where a host's shim says which attempt it runs: ``<log dir>/attempt.json``, for whoever looks (``ma-submit
status`` shows a restart in progress). Nothing coordinates through it: the hosts' coordinator (:mod:`.hosts`)
keeps the job's attempts in step.

With ``MA_MAX_RESTARTS`` > 0 the shim writes it atomically at every change (:func:`announce_attempt`):
``{"attempt": K, "state": "running" | "backoff" | "ended", "pid": <shim pid>}``; ``backoff`` means attempt K
failed and K+1 will start after the back-off (and, on several hosts, once every host is there).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

from ..report.report import write_report

__all__ = ["ATTEMPT_FILE", "announce_attempt", "attempt_file", "read_attempt"]

ATTEMPT_FILE = "attempt.json"
_STATES = ("running", "backoff", "ended")


def attempt_file(log_dir: str) -> str:
    """Where a shim with log directory ``log_dir`` announces its attempt."""
    return os.path.join(log_dir, ATTEMPT_FILE)


def announce_attempt(log_dir: str, attempt: int, state: str) -> None:
    """Write ``<log dir>/attempt.json`` atomically (best effort: it only informs)."""
    if state not in _STATES:
        raise ValueError(f"unknown attempt state {state!r}")
    write_report(attempt_file(log_dir), {"attempt": attempt, "state": state, "pid": os.getpid()})


def read_attempt(path: str) -> Optional[Dict[str, Any]]:
    """A host's announcement, read defensively: None unless it is whole and well-formed."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.loads(handle.read(4096))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    attempt, state, pid = data.get("attempt"), data.get("state"), data.get("pid")
    if not (isinstance(attempt, int) and isinstance(pid, int) and state in _STATES):
        return None
    return {"attempt": attempt, "state": state, "pid": pid}
