"""The local home's history index: what ``list`` and ``prune`` need of every ended job, in one file.

``<home>/job-history.json`` lets a home with thousands of ended jobs be listed without opening thousands of
folders, and without even decoding every row. Its first line is a JSON header (``version``, ``fields``,
``next_due``: the earliest time a ``keep_for`` falls due, or null); then one line per ended job, newest first
(by creation time, then id), with the :data:`ROW_FIELDS` separated by tabs: the id, the name as a JSON string,
the state, the exit code, the four times in seconds (empty: none) and the message as a JSON string. Contract:

1. The job folders are the truth; the index is a cache of what can no longer change. A job that is not ended
   (pending, running, damaged) or has no row yet is read from its own folder on every :meth:`History.snapshot`;
   once it has ended its row is added. A row whose folder is gone is dropped. So jobs submitted at the same
   time lose nothing: nobody has to record a submit, the next reader finds the new folder.
2. A snapshot costs one ``scandir`` of ``<home>/jobs`` (no ``stat`` per job) and one split of the file into
   lines; a row is decoded only when it is used: the page of ``list`` without filters decodes its
   ``--limit`` rows, a filter or ``prune`` decode every row.
3. Written atomically (temporary file + rename), rows sorted, under an exclusive lock on
   ``job-history.json.lock``: the writer reads the file again under the lock and applies only its own
   additions and removals, so two writers never undo each other. Readers take no lock. A failed write is not
   an error (the next reader reads those jobs again).
4. Read defensively: a file whose header is not ours gives one note (:attr:`Snapshot.notes`) and is rebuilt from
   the job folders; a row that does not decode is dropped with one note, and its job is read again next time. A
   missing file is simply built.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import re
from typing import (
    AbstractSet,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Set,
    Tuple,
    TypeAlias,
    Union,
)

from malaunch.entrypoint.public import write_atomic

from ...home import file_lock
from ...status import JobState, JobStatus
from ..listing import ListPage, ListQuery
from .jobdir import JobPaths

__all__ = ["HISTORY_FILE", "HISTORY_VERSION", "ROW_FIELDS", "History", "HistoryRow", "Snapshot"]

HISTORY_FILE = "job-history.json"
HISTORY_VERSION = 2
ROW_FIELDS = ("id", "name", "state", "exit_code", "created_at", "started_at", "ended_at", "keep_for", "message")
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_ENDED = frozenset(state.value for state in JobState if state.is_terminal)

#: Reads one job from its folder: its status and its ``keep_for`` (seconds, or None).
Reader: TypeAlias = "Callable[[str], Tuple[JobStatus, Optional[float]]]"


def _seconds(text: str) -> Optional[float]:
    if not text:
        return None
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(text)
    return value


def _text(value: Optional[float]) -> str:
    return "" if value is None else repr(float(value))


def _sort_key(line: str) -> Tuple[float, str]:
    """(creation time, id) of a row line, for sorting newest first; a row that does not say sorts last."""
    parts = line.split("\t", 5)
    try:
        return (float(parts[4]) if len(parts) > 4 and parts[4] else 0.0), parts[0]
    except ValueError:
        return 0.0, parts[0]


class HistoryRow(NamedTuple):
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

    def to_line(self) -> str:
        """The row as one line of the file (no newline)."""
        code = "" if self.exit_code is None else str(int(self.exit_code))
        return "\t".join([
            self.id, json.dumps(self.name), self.state, code, _text(self.created_at), _text(self.started_at),
            _text(self.ended_at), _text(self.keep_for), json.dumps(self.message),
        ])  # fmt: skip

    @classmethod
    def from_line(cls, line: str) -> HistoryRow:
        """The row in ``line``; raises ``ValueError`` when it is not one."""
        parts = line.split("\t")
        if len(parts) != len(ROW_FIELDS):
            raise ValueError(line)
        job_id, name, state, code, created, started, ended, keep, message = parts
        name, message = json.loads(name), json.loads(message)
        if not _JOB_ID.match(job_id) or state not in _ENDED or not isinstance(name, str):
            raise ValueError(line)
        if not isinstance(message, str):
            raise ValueError(line)
        return cls(job_id, name, state, int(code) if code else None, _seconds(created), _seconds(started),
                   _seconds(ended), _seconds(keep), message)  # fmt: skip

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

    @property
    def due_at(self) -> Optional[float]:
        """When the job's ``keep_for`` has passed since it ended (None: kept until pruned)."""
        ended = self.ended_at if self.ended_at is not None else self.created_at
        return None if self.keep_for is None or ended is None else ended + self.keep_for

    def due(self, now: float) -> bool:
        """Whether the job's ``keep_for`` has passed since it ended."""
        due_at = self.due_at
        return due_at is not None and now >= due_at


class Snapshot:
    """Every job of the home now: the ended ones as row lines (file order: newest first) and rows just added,
    the others read from their folders (``live``); rows are decoded when used (:meth:`rows`), and the ids of those
    that do not decode are kept in ``bad``."""

    __slots__ = ("added", "bad", "home", "lines", "live", "next_due", "notes")

    def __init__(self, lines: Dict[str, str], added: List[HistoryRow], live: Dict[str, JobStatus], notes: List[str],
                 home: str, next_due: Optional[float]) -> None:  # fmt: skip
        self.lines = lines
        self.added = added
        self.live = live
        self.notes = notes
        self.home = home
        self.next_due = next_due
        self.bad: Set[str] = set()

    def __len__(self) -> int:
        return len(self.lines) + len(self.added)

    def _decoded(self, keep: Optional[Callable[[str], bool]]) -> Iterator[HistoryRow]:
        for job_id, line in self.lines.items():
            if keep is not None and not keep(line):
                continue
            try:
                yield HistoryRow.from_line(line)
            except (ValueError, TypeError):
                self.bad.add(job_id)

    def rows(self, keep: Optional[Callable[[str], bool]] = None) -> Iterator[HistoryRow]:
        """The ended jobs' rows, newest first; a row that does not decode is left out (and noted in ``bad``).
        ``keep``: a quick test of a row's line; the lines it refuses are not decoded."""
        added = sorted(self.added, key=lambda r: (r.created_at or 0.0, r.id), reverse=True)
        return heapq.merge(self._decoded(keep), added, key=lambda r: (r.created_at or 0.0, r.id), reverse=True)

    def page(self, query: ListQuery, now: float, gone: AbstractSet[str] = frozenset()) -> ListPage:
        """The newest jobs matching ``query`` (but ``gone``), cut to its limit; statuses made for the page only."""
        live = [s for s in self.live.values() if query.matches(s.state.value, s.name, s.created_at, now)]
        plain = not (query.states or query.name is not None or query.since is not None or query.older_than is not None)
        found: List[Union[HistoryRow, JobStatus]] = list(live)
        matched = len(live)
        rough = query._replace(name=None)
        for row in self.rows(None if plain else lambda line: _may_match(line, rough, now)):
            if row.id in gone or not query.matches(row.state, row.name, row.created_at, now):
                continue
            found.append(row)
            matched += 1
            if plain and query.limit > 0 and matched - len(live) >= query.limit:
                ended = self.lines.keys() | {r.id for r in self.added}
                matched = len(live) + len(ended - gone)
                break
        found.sort(key=lambda item: (item.created_at or 0.0, item.id), reverse=True)
        shown = query.cut(len(found))
        statuses = [
            item.status(JobPaths(self.home, item.id).job_dir) if isinstance(item, HistoryRow) else item
            for item in found[:shown]
        ]
        return ListPage(tuple(statuses), matched - shown)


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

    def load(self) -> Tuple[Dict[str, str], Optional[float], str]:
        """The row lines by id (file order), the header's ``next_due``, and what is wrong with the file ("" when it
        is fine or missing)."""
        try:
            with open(self.path, encoding="utf-8") as handle:
                text = handle.read()
        except FileNotFoundError:
            return {}, None, ""
        except (OSError, UnicodeDecodeError) as exc:
            return {}, None, f"cannot be read ({getattr(exc, 'strerror', None) or exc})"
        head, _, body = text.partition("\n")
        try:
            header = json.loads(head)
        except (ValueError, RecursionError):
            header = None
        if not isinstance(header, dict) or header.get("version") != HISTORY_VERSION:
            return {}, None, f"does not start with a version {HISTORY_VERSION} header (damaged)"
        due = header.get("next_due")
        next_due = float(due) if isinstance(due, (int, float)) and not isinstance(due, bool) else None
        lines: Dict[str, str] = {}
        for line in body.split("\n"):
            if line:
                lines[line.partition("\t")[0]] = line
        return lines, next_due, ""

    def snapshot(self, read: Reader) -> Snapshot:
        """Every job now: rows for the ended ones, statuses read from their folders for the others."""
        lines, next_due, problem = self.load()
        names = self.names()
        present = set(names)
        kept = {job_id: line for job_id, line in lines.items() if job_id in present}  # file order: newest first
        live: Dict[str, JobStatus] = {}
        added: List[HistoryRow] = []
        for name in names:
            if name in kept:
                continue
            status, keep_for = read(name)
            if status.is_terminal:
                added.append(HistoryRow.of(status, keep_for))
            else:
                live[name] = status
        gone = set(lines).difference(kept)
        if added or gone or problem:
            self.update(added, gone)
        for row in added:
            due_at = row.due_at
            if due_at is not None and (next_due is None or due_at < next_due):
                next_due = due_at
        notes = [f"the job history {self.path} {problem}; rebuilt it from the job folders"] if problem else []
        return Snapshot(kept, added, live, notes, self.home, next_due)

    def settle(self, snap: Snapshot) -> None:
        """After using ``snap``: drop the rows that did not decode (their jobs are read again next time), noted."""
        if snap.bad:
            snap.notes.append(f"the job history {self.path} has {len(snap.bad)} damaged row(s); rebuilt them from "
                              "the job folders")  # fmt: skip
            self.update((), snap.bad)

    def forget(self, job_ids: Iterable[str]) -> None:
        """Drop the rows of deleted jobs."""
        self.update((), job_ids)

    def update(self, added: Iterable[HistoryRow], gone: Iterable[str]) -> None:
        """Add ``added`` and drop ``gone`` under the lock (contract 3); a failed write is let go."""
        new = {row.id: row.to_line() for row in added}
        drop = set(gone)
        try:
            os.makedirs(self.home, exist_ok=True)
            with file_lock(self.path + ".lock"):
                lines, _, _ = self.load()
                lines.update(new)
                for job_id in drop:
                    lines.pop(job_id, None)
                body = sorted(lines.values(), key=_sort_key, reverse=True)
                header = {"version": HISTORY_VERSION, "fields": list(ROW_FIELDS), "next_due": _next_due(body)}
                text = json.dumps(header) + "\n" + "".join(line + "\n" for line in body)
                write_atomic(self.path, text, mode=0o600, durable=True, prefix=".job-history.")
        except OSError:
            return


def _may_match(line: str, query: ListQuery, now: float) -> bool:
    """Whether a row line may pass ``query`` (given without its name filter), judged by its state and creation
    time without decoding it."""
    parts = line.split("\t", 5)
    if len(parts) < 6:
        return True  # decoding it will say what is wrong
    try:
        created = float(parts[4]) if parts[4] else None
    except ValueError:
        return True
    return query.matches(parts[2], None, created, now)


def _next_due(lines: Iterable[str]) -> Optional[float]:
    """The earliest ``keep_for`` due time among the row lines (rows that do not decode are skipped)."""
    due: Optional[float] = None
    for line in lines:
        parts = line.split("\t")
        if len(parts) != len(ROW_FIELDS) or not parts[7]:
            continue
        try:
            row = HistoryRow.from_line(line)
        except (ValueError, TypeError):
            continue
        at = row.due_at
        if at is not None and (due is None or at < due):
            due = at
    return due

