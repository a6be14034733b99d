"""Each rank's progress, for every job: the folder ``MALAUNCH_PROGRESS_DIR`` and the records in it.

The shim gives every process it starts ``MALAUNCH_PROGRESS_DIR``, one folder per host that outlives the host's
attempts (``<log dir>/progress.d``). :func:`malaunch.entrypoint.checkpoint.progress` writes there, atomically,
``rank-<R>.json``: the rank's last step, the total when the script knows it, when it was recorded, when this
process first called it, the attempt (``MALAUNCH_ATTEMPT``, then torchrun's own restart count) and the step and
time at the start of its recent window (at most :data:`WINDOW` seconds back), so that a reader has a rate without
keeping history. Readers: the shim (the first progress of an attempt after a failure, :mod:`.recovery`),
``ma-submit status`` (step, rate, time left) and ``ma-submit top`` (the step of each rank).

Standard library only; read defensively (a record cut short or damaged is left out). Pure except for the reads.
"""

from __future__ import annotations

import json
import math
import os
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

__all__ = ["PROGRESS_DIR_NAME", "PROGRESS_DIR_VAR", "WINDOW", "JobProgress", "RankProgress", "attempt_key",
           "first_progress", "newest_attempt", "read_progress", "record_of_row", "record_text",
           "summarize"]  # fmt: skip

PROGRESS_DIR_VAR = "MALAUNCH_PROGRESS_DIR"
PROGRESS_DIR_NAME = "progress.d"  # in the host's log folder (beside ``attempt-K/``)
#: Seconds of a rank's recent steps its record's rate is measured over.
WINDOW = 30.0
_MAX_RECORD = 4096


def attempt_key(text: str) -> Tuple[int, ...]:
    """A record's attempt (``"K.R"``: the shim's attempt, then torchrun's own restart count) as numbers; a part
    that is not a whole number counts as 0."""
    return tuple(int(part) if part.isdigit() else 0 for part in text.split("."))


class RankProgress(NamedTuple):
    """One rank's last progress record (``host`` is the host whose folder held it, when the reader knows it)."""

    rank: int
    step: int
    total: Optional[int]
    time: float  # when the step was recorded (seconds since the epoch)
    first: float  # when this rank's process first called progress()
    attempt: str  # "K.R"
    since_step: int  # the step at the start of the recent window
    since_time: float  # and its time
    host: Optional[int] = None

    @property
    def rate(self) -> Optional[float]:
        """Steps per second over the recent window; None with a single point (or a step that went back)."""
        took = self.time - self.since_time
        if took <= 0 or self.step < self.since_step:
            return None
        return (self.step - self.since_step) / took

    def row(self) -> List[object]:
        """The record as a compact list (the console's progress line, :mod:`..report.statuslines`): rank, step,
        total, time, first, attempt, the window's step and time; :func:`record_of_row` reads it back."""
        return [self.rank, self.step, self.total, round(self.time, 3), round(self.first, 3), self.attempt,
                self.since_step, round(self.since_time, 3)]  # fmt: skip


_ROW_FIELDS = ("rank", "step", "total", "time", "first", "attempt")


def record_of_row(row: object, host: Optional[int] = None) -> Optional[RankProgress]:
    """A record from :meth:`RankProgress.row`'s list, checked as a record file is (None: not one)."""
    if not (isinstance(row, list) and len(row) == len(_ROW_FIELDS) + 2):
        return None
    value: Dict[str, object] = dict(zip(_ROW_FIELDS, row))
    value["since"] = row[len(_ROW_FIELDS) :]
    return _parse(value, host)


def record_text(rank: int, step: int, total: Optional[int], when: float, first: float, attempt: str,
                since: Tuple[int, float]) -> str:  # fmt: skip
    """The text of ``rank-<R>.json``."""
    return json.dumps({"rank": rank, "step": step, "total": total, "time": round(when, 3), "first": round(first, 3),
                       "attempt": attempt, "since": [since[0], round(since[1], 3)]}) + "\n"  # fmt: skip


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _when(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _parse(value: object, host: Optional[int]) -> Optional[RankProgress]:
    if not isinstance(value, dict):
        return None
    rank, step, total, when = value.get("rank"), value.get("step"), value.get("total"), value.get("time")
    first, attempt, since = value.get("first", when), value.get("attempt", "0"), value.get("since")
    if not (isinstance(rank, int) and _whole(rank) and isinstance(step, int) and _whole(step)
            and isinstance(when, (int, float)) and _when(when) and isinstance(first, (int, float)) and _when(first)
            and isinstance(attempt, str)):  # fmt: skip
        return None
    if not (isinstance(total, int) and _whole(total)):
        total = None
    since_step, since_time = step, float(when)
    if isinstance(since, list) and len(since) == 2:
        old_step, old_time = since
        if isinstance(old_step, int) and _whole(old_step) and isinstance(old_time, (int, float)) and _when(old_time):
            since_step, since_time = old_step, float(old_time)
    return RankProgress(rank, step, total, float(when), float(first), attempt[:40], since_step, since_time, host)


def read_progress(folder: str, host: Optional[int] = None) -> List[RankProgress]:
    """The records in ``folder`` (a ``MALAUNCH_PROGRESS_DIR``, or a checkpoint folder's ``.progress``), by rank;
    a missing folder, or a record that cannot be read, gives nothing."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    found: Dict[int, RankProgress] = {}
    for name in names:
        if not (name.startswith("rank-") and name.endswith(".json")):
            continue
        try:
            with open(os.path.join(folder, name), "rb") as handle:
                value = json.loads(handle.read(_MAX_RECORD).decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(value, dict) and "rank" not in value:  # a checkpoint folder's older record: rank by name
            digits = name[len("rank-") : -len(".json")]
            value = {**value, "rank": int(digits)} if digits.isdigit() else value
        record = _parse(value, host)
        if record is not None:
            found[record.rank] = record
    return [found[rank] for rank in sorted(found)]


def newest_attempt(records: Iterable[RankProgress]) -> List[RankProgress]:
    """The records of the newest attempt among ``records`` (a rank that has not reported in it yet is left out)."""
    listed = list(records)
    if not listed:
        return []
    newest = max(attempt_key(record.attempt) for record in listed)
    return [record for record in listed if attempt_key(record.attempt) == newest]


def first_progress(records: Iterable[RankProgress], attempt: int, launcher: Optional[int] = None) -> Optional[float]:
    """When a rank of the shim's attempt ``attempt`` first called progress() (the earliest), or None; with
    ``launcher``, a rank of that attempt of the launcher's own inside it (``"K.R"``: R == ``launcher``)."""
    wanted = (attempt,) if launcher is None else (attempt, launcher)
    times = [record.first for record in records if (*attempt_key(record.attempt), 0)[: len(wanted)] == wanted]
    return min(times) if times else None


class JobProgress(NamedTuple):
    """How far a job got, from its ranks' records of the newest attempt: the slowest rank's step (the job is as far
    as that rank), its total, its rate, the time left at that rate, and when the newest record was written."""

    step: int
    total: Optional[int]
    ranks: int
    fastest: int  # the largest step of any rank
    rate: Optional[float]  # steps per second (the slowest rank's recent window)
    left: Optional[float]  # seconds, when the total and the rate are known
    time: float
    attempt: str

    def to_json(self) -> Dict[str, object]:
        """JSON-ready data."""
        return {"step": self.step, "total": self.total, "ranks": self.ranks, "fastest": self.fastest,
                "rate": None if self.rate is None else round(self.rate, 4),
                "seconds_left": None if self.left is None else round(self.left, 1), "time": self.time,
                "attempt": self.attempt}  # fmt: skip


def summarize(records: Sequence[RankProgress]) -> Optional[JobProgress]:
    """The job's progress from every rank's record (every host's), or None when no rank recorded any."""
    current = newest_attempt(records)
    if not current:
        return None
    slowest = min(current, key=lambda record: (record.step, record.rank))
    totals = [record.total for record in current if record.total is not None]
    total = max(totals) if totals else None
    rate = slowest.rate
    left = None
    if total is not None and rate is not None and rate > 0:
        left = max(0, total - slowest.step) / rate
    elif total is not None and slowest.step >= total:
        left = 0.0
    return JobProgress(slowest.step, total, len(current), max(record.step for record in current), rate, left,
                       max(record.time for record in current), slowest.attempt)  # fmt: skip
