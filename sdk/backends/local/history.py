"""The local home's history index: what ``list`` and ``prune`` need of every ended job, in one file.

``<home>/job-history.json`` holds one row per ended job, ``[id, name, state, exit_code, created_at,
started_at, ended_at, keep_for, message]`` (:data:`ROW_FIELDS`), so that a home with thousands of ended jobs is
listed without opening thousands of folders. Contract:

1. The job folders are the truth; the index is a cache of what can no longer change. A job that is not ended
   (pending, running, damaged) or has no row yet is read from its own folder on every :meth:`History.snapshot`;
   once it has ended its row is added. A row whose folder is gone is dropped. So jobs submitted at the same
   time lose nothing: nobody has to record a submit, the next reader finds the new folder.
2. The folder names come from one ``scandir`` of ``<home>/jobs`` (no ``stat`` per job); only the jobs without a
   row are read.
3. Written atomically (temporary file + rename) under an exclusive lock on ``job-history.json.lock`` beside it: the
   writer reads the file again under the lock and applies only its own additions and removals, so two
   writers never undo each other. Readers take no lock. A failed write is not an error (the next reader
   reads those jobs again).
4. Read defensively: a file that is not JSON, has the wrong shape, or rows that are not rows gives one note
   (:attr:`Snapshot.notes`) and is rebuilt from the job folders; a missing file is simply built.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from typing import AbstractSet, Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from malaunch.entrypoint.public import write_atomic

from ...home import file_lock
from ...status import JobState, JobStatus
from ..listing import ListPage, ListQuery
from .jobdir import JobPaths

__all__ = ["HISTORY_FILE", "HISTORY_VERSION", "ROW_FIELDS", "History", "HistoryRow", "Snapshot"]

HISTORY_FILE = "job-history.json"
HISTORY_VERSION = 1
ROW_FIELDS = ("id", "name", "state", "exit_code", "created_at", "started_at", "ended_at", "keep_for", "message")
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_ENDED = frozenset(state.value for state in JobState if state.is_terminal)

#: Reads one job from its folder: its status and its ``keep_for`` (seconds, or None).
Reader = Callable[[str], Tuple[JobStatus, Optional[float]]]


def _seconds(value: object) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(value)
    return float(value)


@dataclass(frozen=True)
class HistoryRow:
    """One ended job as the index keeps it."""

    id: str
    name: str
    state: str
    exit_code: Optional[int]
    created_at: Optional[float]
    started_at: Optional[float]
    ended_at: Optional[float]
    keep_for: Optional[float]
    message: str

    def to_json(self) -> List[Any]:
        """The row as a JSON list, in :data:`ROW_FIELDS` order."""
        return [getattr(self, name) for name in ROW_FIELDS]

    @classmethod
    def from_json(cls, raw: object) -> HistoryRow:
        """The row in ``raw``; raises ``ValueError`` when it is not one."""
        if not isinstance(raw, list) or len(raw) != len(ROW_FIELDS):
            raise ValueError(raw)
        job_id, name, state, code, created, started, ended, keep, message = raw
        if not isinstance(job_id, str) or not _JOB_ID.match(job_id) or state not in _ENDED:
            raise ValueError(raw)
        if not isinstance(name, str) or not isinstance(message, str):
            raise ValueError(raw)
        if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
            raise ValueError(raw)
        return cls(job_id, name, str(state), code, _seconds(created), _seconds(started), _seconds(ended),
                   _seconds(keep), message)  # fmt: skip

    @classmethod
    def of(cls, status: JobStatus, keep_for: Optional[float]) -> HistoryRow:
        """The row of an ended job's status."""
        return cls(status.id, status.name, status.state.value, status.exit_code, status.created_at,
                   status.started_at, status.ended_at, keep_for, status.message)  # fmt: skip

    def status(self, location: str) -> JobStatus:
        """The job's status as the index knows it (no hosts: ``status JOB_ID`` reads those)."""
        return JobStatus(
            id=self.id, backend="local", state=JobState(self.state), exit_code=self.exit_code, message=self.message,
            raw_state=self.state, name=self.name, created_at=self.created_at, started_at=self.started_at,
            ended_at=self.ended_at, location=location,
        )  # fmt: skip

    def due(self, now: float) -> bool:
        """Whether the job's ``keep_for`` has passed since it ended."""
        ended = self.ended_at if self.ended_at is not None else self.created_at
        return self.keep_for is not None and ended is not None and now - ended >= self.keep_for


@dataclass(frozen=True)
class Snapshot:
    """Every job of the home now: ``ended`` from the index (or read and added), ``live`` read from the folders."""

    ended: Dict[str, HistoryRow]
    live: Dict[str, JobStatus]
    notes: Tuple[str, ...] = ()
    root: str = ""  # the jobs' folder

    def page(self, query: ListQuery, now: float, gone: AbstractSet[str] = frozenset()) -> ListPage:
        """The newest jobs matching ``query`` (but ``gone``), cut to its limit; statuses made for the page only."""
        found: List[Tuple[float, str, Union[HistoryRow, JobStatus]]] = [
            (row.created_at or 0.0, key, row) for key, row in self.ended.items()
            if key not in gone and query.matches(row.state, row.name, row.created_at, now)
        ]  # fmt: skip
        found += [(s.created_at or 0.0, key, s) for key, s in self.live.items()
                  if query.matches(s.state.value, s.name, s.created_at, now)]  # fmt: skip
        found.sort(key=lambda item: (item[0], item[1]), reverse=True)
        shown = query.cut(len(found))
        statuses = [
            item.status(os.path.join(self.root, key)) if isinstance(item, HistoryRow) else item
            for _, key, item in found[:shown]
        ]
        return ListPage(tuple(statuses), len(found) - shown, self.notes)


class History:
    """The history index of the local home ``home`` (see the module docstring)."""

    def __init__(self, home: str) -> None:
        self.home = home
        self.root = JobPaths.jobs_root(home)
        self.path = os.path.join(home, HISTORY_FILE)

    def names(self) -> List[str]:
        """The job folders' names (one ``scandir``, no ``stat`` per job)."""
        try:
            with os.scandir(self.root) as found:
                return [entry.name for entry in found if _JOB_ID.match(entry.name) and entry.is_dir()]
        except OSError:
            return []

    def load(self) -> Tuple[Dict[str, HistoryRow], str]:
        """The rows of the file, and what is wrong with it ("" when it is fine or missing)."""
        try:
            with open(self.path, "rb") as handle:
                data = json.loads(handle.read())
        except FileNotFoundError:
            return {}, ""
        except OSError as exc:
            return {}, f"cannot be read ({exc.strerror or exc})"
        except (ValueError, RecursionError):
            return {}, "is not valid JSON (damaged)"
        jobs = data.get("jobs") if isinstance(data, dict) else None
        if not isinstance(jobs, list) or data.get("version") != HISTORY_VERSION:
            return {}, f"does not hold a version {HISTORY_VERSION} job list (damaged)"
        rows: Dict[str, HistoryRow] = {}
        bad = 0
        for raw in jobs:
            try:
                row = HistoryRow.from_json(raw)
            except ValueError:
                bad += 1
                continue
            rows[row.id] = row
        return rows, (f"has {bad} damaged row(s)" if bad else "")

    def snapshot(self, read: Reader) -> Snapshot:
        """Every job now: rows for the ended ones, statuses read from their folders for the others."""
        rows, problem = self.load()
        names = self.names()
        ended: Dict[str, HistoryRow] = {}
        live: Dict[str, JobStatus] = {}
        added: Dict[str, HistoryRow] = {}
        for name in names:
            row = rows.get(name)
            if row is None:
                status, keep_for = read(name)
                if not status.is_terminal:
                    live[name] = status
                    continue
                row = added[name] = HistoryRow.of(status, keep_for)
            ended[name] = row
        gone = set(rows).difference(names)
        if added or gone or problem:
            self.update(added.values(), gone)
        notes = (f"the job history {self.path} {problem}; rebuilt it from the job folders",) if problem else ()
        return Snapshot(ended, live, notes, self.root)

    def forget(self, job_ids: Iterable[str]) -> None:
        """Drop the rows of deleted jobs."""
        self.update((), job_ids)

    def update(self, added: Iterable[HistoryRow], gone: Iterable[str]) -> None:
        """Add ``added`` and drop ``gone`` under the lock (contract 3); a failed write is let go."""
        added, gone = list(added), set(gone)
        try:
            os.makedirs(self.home, exist_ok=True)
            with file_lock(self.path + ".lock"):
                rows, _ = self.load()
                rows.update((row.id, row) for row in added)
                for job_id in gone:
                    rows.pop(job_id, None)
                body = ",\n".join(json.dumps(row.to_json()) for row in rows.values())
                text = f'{{"version": {HISTORY_VERSION}, "fields": {json.dumps(ROW_FIELDS)}, "jobs": [\n{body}\n]}}\n'
                write_atomic(self.path, text, mode=0o600, durable=True, prefix=".job-history.")
        except OSError:
            return
