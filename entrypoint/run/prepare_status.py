"""``<log dir>/prepare.json``: which prepare step a host's shim runs, since when, and how its steps ended.

The shim writes it atomically at each change (:func:`note_prepare`, from :mod:`.prepare_steps`):
``{"state": "running" | "done" | "failed" | "stopped", "step", "of", "argv", "since", "pid"}`` (``since``:
seconds since the epoch). ``ma-submit status`` reads it (:func:`prepare_line`) to say that a host still
prepares, and which step. Light to import: status loads it.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Optional

from ..report.reportfile import write_report

__all__ = ["PREPARE_FILE", "note_prepare", "prepare_file", "prepare_line", "read_prepare"]

PREPARE_FILE = "prepare.json"
_STATES = ("running", "done", "failed", "stopped")
_ARGV_SHOWN = 100


def prepare_file(log_dir: str) -> str:
    """Where a shim with log directory ``log_dir`` says how its prepare steps go."""
    return os.path.join(log_dir, PREPARE_FILE)


def note_prepare(log_dir: str, state: str, step: int, of: int, argv: List[str], since: float) -> None:
    """Write ``prepare.json`` atomically (best effort: it only informs)."""
    if state not in _STATES:
        raise ValueError(f"unknown prepare state {state!r}")

    write_report(prepare_file(log_dir), {"state": state, "step": step, "of": of, "argv": list(argv),
                                         "since": round(since, 3), "pid": os.getpid()})  # fmt: skip


def read_prepare(path: str) -> Optional[Dict[str, Any]]:
    """A host's ``prepare.json``, read defensively: None unless whole and well-formed."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.loads(handle.read(65536))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    state, step, of, argv, since = (data.get(key) for key in ("state", "step", "of", "argv", "since"))
    whole = all(isinstance(value, int) and not isinstance(value, bool) and value >= 1 for value in (step, of))
    if not (state in _STATES and whole and isinstance(argv, list) and all(isinstance(w, str) for w in argv)
            and isinstance(since, (int, float)) and not isinstance(since, bool) and math.isfinite(since)):  # fmt: skip
        return None
    return {"state": state, "step": step, "of": of, "argv": argv, "since": float(since)}


def prepare_line(log_dir: str, now: float) -> Optional[str]:
    """``running prepare step 1 of 2 ["python", "fetch.py"] for 42 s`` while the host's steps run; else None."""
    found = read_prepare(prepare_file(log_dir))
    if found is None or found["state"] != "running":
        return None
    shown = json.dumps(found["argv"], ensure_ascii=False)
    if len(shown) > _ARGV_SHOWN:
        shown = shown[: _ARGV_SHOWN - 4] + "...]"
    took = max(0.0, now - found["since"])
    return f"running prepare step {found['step']} of {found['of']} {shown} for {took:.0f} s"
