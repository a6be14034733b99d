"""Time to recover: for each attempt that failed, when the failure was seen, when the attempt's last rank was gone,
when the next attempt started and when a rank of it first reported progress.

:class:`~.recovery_clock.RecoveryClock` keeps them. It is fed by the one attempt loop
(:class:`~.attempts.AttemptLoop`): an attempt starts (``started``), an attempt's run is over (``ended``, with its
result, whose ``seen_at`` is when this host's supervisor saw the failure), and, on the job's host 0, the
coordinator's book after each change (``book``: when the job's coordinator first heard of the attempt's failure,
from any host, and when every host's account of it was in). On several hosts host 0 therefore has the job's times
(the earliest sight of the failure, the last host's end); another host has its own. The first progress is the
earliest first ``progress()`` call of any rank of the next attempt, read from the ranks' records
(:mod:`.progress`: this host's folder, and the checkpoint folder's ``.progress`` that every host shares).

Every change is written atomically to ``<log dir>/recovery.json`` (``{"recovery": [...]}``, what ``ma-submit
status`` reads while the job runs) and the records go into the report (``recovery``). Times are seconds since the
epoch (UTC), as the report's other times; a phase that never happened is null, and the record's ``line`` says so
in words.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any, Dict, List, NamedTuple, Optional

__all__ = ["RECOVERY_FILE", "Recovery", "read_recovery", "recovery_file", "recovery_lines"]

RECOVERY_FILE = "recovery.json"
_PHASES = ("failure_seen", "last_rank_gone", "next_started", "first_progress")


def recovery_file(log_dir: str) -> str:
    """Where a shim with log folder ``log_dir`` keeps its time-to-recover records."""
    return os.path.join(log_dir, RECOVERY_FILE)


def _seconds(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 3)


def _clock(when: float) -> str:
    """``when`` as the time of day, UTC, to the millisecond."""
    millis = round(when * 1000)
    return time.strftime("%H:%M:%S", time.gmtime(millis // 1000)) + f".{millis % 1000:03d} UTC"


class Recovery(NamedTuple):
    """The recovery after attempt ``attempt`` failed (absolute times: seconds since the epoch, UTC; None: that
    phase has not happened, or never will)."""

    attempt: int
    failure_seen: float
    last_rank_gone: Optional[float] = None
    next_started: Optional[float] = None
    first_progress: Optional[float] = None
    ended: bool = False  # no next attempt will start (the job ended with this failure, or was stopped)

    @property
    def next_attempt(self) -> int:
        return self.attempt + 1

    def since_failure(self, phase: str) -> Optional[float]:
        """Seconds from the failure seen to ``phase`` (one of the time fields), None when it has not happened."""
        value = getattr(self, phase)
        return None if value is None else max(0.0, value - self.failure_seen)

    def missing(self, phase: str) -> str:
        """Words for a phase that has not happened."""
        after = self.next_attempt
        if phase == "last_rank_gone":
            return "not yet: the attempt's ranks are still ending"
        if self.ended:
            return "never: the job ended without another attempt"
        if phase == "next_started":
            return f"not yet: attempt {after} waits to start"
        if self.next_started is None:
            return f"not yet: attempt {after} has not started"
        return f"not yet: no rank of attempt {after} called progress()"

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready data: the four times, the seconds from the failure to each, and the record in one line."""
        data: Dict[str, Any] = {"attempt": self.attempt, "next_attempt": self.next_attempt, "ended": self.ended}
        for phase in _PHASES:
            data[phase] = _seconds(getattr(self, phase))
        for phase in _PHASES[1:]:
            data[f"{phase}_after"] = _seconds(self.since_failure(phase))
        data["line"] = "; ".join(recovery_lines(self, label=False))
        return data

    @classmethod
    def from_json(cls, data: object) -> Optional[Recovery]:
        """A record as :meth:`to_json` wrote it, or None when it is not one (read defensively)."""
        if not isinstance(data, dict):
            return None
        attempt, ended = data.get("attempt"), data.get("ended", False)
        if not (isinstance(attempt, int) and not isinstance(attempt, bool) and attempt >= 0):
            return None
        times: List[Optional[float]] = []
        for phase in _PHASES:
            value = data.get(phase)
            good = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            times.append(float(value) if good and isinstance(value, (int, float)) else None)
        seen = times[0]
        if seen is None:
            return None
        return cls(attempt, seen, times[1], times[2], times[3], ended is True)


def recovery_lines(record: Recovery, label: bool = True) -> List[str]:
    """The record in words, one line per phase: its time of day (UTC) and the seconds since the failure, or why
    it has not happened (``label``: the labels aligned, as ``ma-submit status`` prints them)."""
    after = record.next_attempt
    names = {"failure_seen": f"attempt {record.attempt} failure seen", "last_rank_gone": "last rank gone",
             "next_started": f"attempt {after} started", "first_progress": f"attempt {after} first progress"}
    width = max(len(name) for name in names.values()) if label else 0
    lines = []
    for phase in _PHASES:
        value = getattr(record, phase)
        if value is None:
            said = record.missing(phase)
        elif phase == "failure_seen":
            said = _clock(value)
        else:
            said = f"{_clock(value)} (+{record.since_failure(phase):.2f} s)"
        lines.append(f"{names[phase].ljust(width)}  {said}" if label else f"{names[phase]}: {said}")
    return lines


def read_recovery(path: str) -> List[Recovery]:
    """The records in a ``recovery.json`` (or a report's ``recovery`` list), read defensively."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.loads(handle.read(1 << 20))
    except (OSError, ValueError):
        return []
    items = data.get("recovery") if isinstance(data, dict) else None
    found = [Recovery.from_json(item) for item in items] if isinstance(items, list) else []
    return [item for item in found if item is not None]
