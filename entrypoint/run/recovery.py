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

Each record also keeps when the next attempt's run was over (``next_ended``, a fact of this host's loop): a next
attempt that ended before any rank of it called ``progress()`` never had a first progress, and its record says
so (``never``), not ``not yet``.

A launcher that restarts its workers itself inside one attempt (torchrun's ``--max_restarts``) gets records of its
own (``launcher_attempt``): the run's worker watch tells the clock (``launcher_rounds``) the times of each of the
launcher's attempts as they change (:class:`~.procs.watch.Round`: its first worker found, its first worker failed,
its last worker gone), and the first progress is that of the ranks whose records say ``"K.R+1"``.

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
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, NamedTuple, Optional, Sequence

from .progress import first_progress

if TYPE_CHECKING:
    from .progress import RankProgress

__all__ = ["RECOVERY_FILE", "Recovery", "read_recovery", "recovery_file", "recovery_lines", "with_first_progress"]

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
    phase has not happened, or never will). With ``launcher_attempt`` it is a launcher's own restart inside the
    shim's attempt ``attempt`` (torchrun's ``--max_restarts``): its attempt ``launcher_attempt`` failed and the next
    is ``launcher_attempt + 1``, as the progress records number them (``"K.R"``)."""

    attempt: int
    failure_seen: float
    last_rank_gone: Optional[float] = None
    next_started: Optional[float] = None
    first_progress: Optional[float] = None
    ended: bool = False  # no next attempt will start (the job ended with this failure, or was stopped)
    next_ended: Optional[float] = None  # when the next attempt's run was over (None: it runs, or never started)
    launcher_attempt: Optional[int] = None  # a launcher's own restart: its attempt that failed (None: the shim's)

    @property
    def next_attempt(self) -> int:
        """The shim's attempt the next one belongs to (the same one for a launcher's own restart)."""
        return self.attempt if self.launcher_attempt is not None else self.attempt + 1

    @property
    def label(self) -> str:
        """The failed attempt in words: ``attempt K``, or ``attempt K.R`` for a launcher's own."""
        return f"attempt {self.attempt}" + ("" if self.launcher_attempt is None else f".{self.launcher_attempt}")

    @property
    def next_label(self) -> str:
        """The next attempt in words: ``attempt K+1``, or ``attempt K.R+1`` for a launcher's own restart."""
        if self.launcher_attempt is None:
            return f"attempt {self.attempt + 1}"
        return f"attempt {self.attempt}.{self.launcher_attempt + 1}"

    def first_progress_in(self, records: Iterable[RankProgress]) -> Optional[float]:
        """The next attempt's first progress in ``records`` (no earlier than its start), or None."""
        found = first_progress(records, self.next_attempt,
                               None if self.launcher_attempt is None else self.launcher_attempt + 1)  # fmt: skip
        if found is None:
            return None
        return max(found, self.next_started) if self.next_started is not None else found

    def since_failure(self, phase: str) -> Optional[float]:
        """Seconds from the failure seen to ``phase`` (one of the time fields), None when it has not happened."""
        value = getattr(self, phase)
        return None if value is None else max(0.0, value - self.failure_seen)

    def missing(self, phase: str) -> str:
        """Words for a phase that has not happened."""
        after = self.next_label
        if phase == "last_rank_gone":
            return "not yet: the attempt's ranks are still ending"
        if self.ended:
            return "never: the job ended without another attempt"
        if phase == "next_started":
            return f"not yet: {after} waits to start"
        if self.next_started is None:
            return f"not yet: {after} has not started"
        if self.next_ended is not None:
            return f"never: {after} ended without progress (no rank of it called progress())"
        return f"not yet: no rank of {after} called progress()"

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready data: the four times, the seconds from the failure to each, and the record in one line."""
        data: Dict[str, Any] = {"attempt": self.attempt, "next_attempt": self.next_attempt, "ended": self.ended,
                                "launcher_attempt": self.launcher_attempt}
        for phase in _PHASES:
            data[phase] = _seconds(getattr(self, phase))
        data["next_ended"] = _seconds(self.next_ended)
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
        over = data.get("next_ended")
        good = isinstance(over, (int, float)) and not isinstance(over, bool) and math.isfinite(over)
        next_ended = float(over) if good and isinstance(over, (int, float)) else None
        own = data.get("launcher_attempt")
        launcher = own if isinstance(own, int) and not isinstance(own, bool) and own >= 0 else None
        return cls(attempt, seen, times[1], times[2], times[3], ended is True, next_ended, launcher)


def recovery_lines(record: Recovery, label: bool = True) -> List[str]:
    """The record in words, one line per phase: its time of day (UTC) and the seconds since the failure, or why
    it has not happened (``label``: the labels aligned, as ``ma-submit status`` prints them)."""
    after = record.next_label
    names = {"failure_seen": f"{record.label} failure seen", "last_rank_gone": "last rank gone",
             "next_started": f"{after} started", "first_progress": f"{after} first progress"}
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


def with_first_progress(records: Sequence[Recovery], progress: Sequence[RankProgress]) -> List[Recovery]:
    """``records`` with the first progress of each next attempt that started and whose first progress the shim has
    not written down yet (it does when that attempt ends), from the ranks' ``progress`` records of every host."""
    filled = []
    for record in records:
        if record.next_started is not None and record.first_progress is None:
            first = record.first_progress_in(progress)
            if first is not None:
                record = record._replace(first_progress=first)
        filled.append(record)
    return filled


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
