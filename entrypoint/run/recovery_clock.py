"""The clock of the time to recover (:mod:`.recovery`: the records, their file and their reading): fed by the one
attempt loop, by the run's worker watch when the launcher restarts its workers itself, and, on host 0 of several,
by the coordinator's book; every change written to ``recovery.json`` and said in the console's recovery line
(:mod:`.statuslines`).
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, Optional, Sequence

from ..report.reportfile import write_report
from .progress import PROGRESS_DIR_NAME, read_progress
from .recovery import Recovery, recovery_file
from .statuslines import recovery_text

if TYPE_CHECKING:
    from ..report.report import RunResult
    from .procs.watch import Round

__all__ = ["RecoveryClock", "progress_dirs"]


def _seconds(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 3)


class _Book:
    """What host 0's coordinator saw of one attempt: when it first heard of a failure, when every account was in."""

    __slots__ = ("failed", "over")

    def __init__(self) -> None:
        self.failed: Optional[float] = None
        self.over: Optional[float] = None


class RecoveryClock:
    """The time-to-recover records of one shim's attempts (see the module's docstring)."""

    def __init__(self, log_dir: str, progress_dirs: Sequence[str], say: Callable[[str], None]) -> None:
        self.path = recovery_file(log_dir)
        self.progress_dirs = tuple(progress_dirs)
        self.say = say
        self.records: Dict[int, Recovery] = {}  # failed attempt -> its record
        self.rounds: Dict[int, List[Recovery]] = {}  # the shim's attempt -> its launcher's own restarts' records
        self.books: Dict[int, _Book] = {}  # attempt -> what the coordinator saw (host 0 of several)
        self.lock = threading.Lock()  # book() runs on the coordinator's thread, launcher_rounds() on the watch's
        self.told = False  # a write that failed was said once
        self.line: Optional[str] = None  # the recovery line said last

    # -- what the attempt loop says -------------------------------------------------------------------------
    def started(self, index: int) -> None:
        """Attempt ``index`` starts now."""
        now = round(time.time(), 3)
        with self.lock:
            record = self.records.get(index - 1)
            if record is not None and record.next_started is None:
                self.records[index - 1] = self._merged(record)._replace(next_started=now)
            self._progress()
        self._write()

    def ended(self, index: int, result: RunResult) -> None:
        """Attempt ``index``'s run is over (every process of it on this host is gone) with ``result``."""
        now = round(time.time(), 3)
        with self.lock:
            self._progress()
            # a launcher's attempt that failed and was not restarted is this attempt's failure (its record below)
            self.rounds[index] = [record for record in self.rounds.get(index, []) if record.next_started is not None]
            before = self.records.get(index - 1)
            if before is not None and before.next_started is not None and before.next_ended is None:
                self.records[index - 1] = before._replace(next_ended=now)
            failed = result.exit_code != 0 or result.root_cause is not None
            if failed and result.shim_signal is None:
                seen = round(result.seen_at, 3) if result.seen_at is not None else now
                self.records[index] = self._merged(Recovery(index, min(seen, now), now))
        self._write()

    def finish(self) -> List[Recovery]:
        """The loop is over: no record waits for another attempt; every record, oldest first."""
        now = round(time.time(), 3)
        with self.lock:
            self._progress()
            for index, record in self.records.items():
                if record.next_started is None:
                    self.records[index] = self._merged(record)._replace(ended=True)
                elif record.next_ended is None:  # the loop is over: so is every attempt it started
                    self.records[index] = record._replace(next_ended=now)
            for index, rounds in self.rounds.items():
                self.rounds[index] = [record._replace(next_ended=now) if record.next_ended is None else record
                                      for record in rounds]  # fmt: skip
            found = self._all()
        self._write()
        return found

    # -- what the run's worker watch says (its thread) ------------------------------------------------------
    def launcher_rounds(self, index: int, rounds: Sequence[Round]) -> None:
        """The launcher of attempt ``index`` restarts its workers itself: ``rounds`` are its attempts' times so
        far (the watch's, at each change); each one that failed gets a record, its next one's start once seen."""
        with self.lock:
            known = {record.launcher_attempt: record for record in self.rounds.get(index, [])}
            starts = {item.attempt: item.seen for item in rounds}
            made: List[Recovery] = []
            for item in rounds:
                if item.failed is None:
                    continue
                before = known.get(item.attempt)
                made.append(Recovery(index, round(item.failed, 3), _seconds(item.gone),
                                     _seconds(starts.get(item.attempt + 1)),
                                     before.first_progress if before is not None else None,
                                     launcher_attempt=item.attempt))  # fmt: skip
                if before is not None and before.next_ended is not None:
                    made[-1] = made[-1]._replace(next_ended=before.next_ended)
            self.rounds[index] = made
            self._progress()
        self._write()

    def _all(self) -> List[Recovery]:
        """Every record, in the order the attempts happened (under the lock)."""
        found = [*self.records.values(), *(record for rounds in self.rounds.values() for record in rounds)]
        return sorted(found, key=lambda record: (record.attempt, 1 << 30 if record.launcher_attempt is None
                                                 else record.launcher_attempt))  # fmt: skip

    # -- what host 0's coordinator says (its thread) --------------------------------------------------------
    def book(self, attempt: int, failed: Sequence[bool], heard: bool) -> None:
        """Note, from the coordinator's book, when the running attempt's failure was first heard of and when every
        host's account of it was in (called after each change; :func:`~.hosts.bookwatch.clock_watch` reads the
        book): ``attempt`` the running (or last) attempt (-1: none yet), ``failed`` whether each decided attempt
        failed (every account of those is in), ``heard`` whether a failure of ``attempt`` was heard of."""

        now = round(time.time(), 3)
        with self.lock:
            for done, verdict in enumerate(failed):
                entry = self.books.setdefault(done, _Book())
                if entry.failed is None and verdict:
                    entry.failed = now
                if entry.over is None:
                    entry.over = now
            if attempt < 0:
                return
            entry = self.books.setdefault(attempt, _Book())
            if heard and entry.failed is None and attempt >= len(failed):
                entry.failed = now

    # -- inside -----------------------------------------------------------------------------------------------
    def _merged(self, record: Recovery) -> Recovery:
        """``record`` with the coordinator's view laid over this host's (host 0 of several): the failure seen at
        the earliest, the last rank gone at the latest (under the lock)."""
        book = self.books.get(record.attempt)
        if book is None:
            return record
        seen = min(record.failure_seen, book.failed) if book.failed is not None else record.failure_seen
        gone = record.last_rank_gone
        if book.over is not None:
            gone = book.over if gone is None else max(gone, book.over)
        return record._replace(failure_seen=seen, last_rank_gone=gone)

    def _progress(self) -> None:
        """Fill in the first progress of each next attempt that has started (under the lock)."""
        waiting = [record for record in self._all()
                   if record.next_started is not None and record.first_progress is None]  # fmt: skip
        if not waiting:
            return
        found = [item for folder in self.progress_dirs for item in read_progress(folder)]
        for record in waiting:
            first = record.first_progress_in(found)
            if first is None:
                continue
            filled = record._replace(first_progress=round(first, 3))
            if record.launcher_attempt is None:
                self.records[record.attempt] = filled
            else:
                self.rounds[record.attempt] = [filled if item.launcher_attempt == record.launcher_attempt else item
                                               for item in self.rounds[record.attempt]]  # fmt: skip

    def _write(self) -> None:
        """Write the records to ``recovery.json`` and, when they changed, say them in the console's recovery line
        (:mod:`.statuslines`: what a cloud job's ``status`` reads)."""
        with self.lock:
            found = self._all()
            if not found:
                return
            data = {"recovery": [record.to_json() for record in found]}
        problem = write_report(self.path, data)
        if problem and not self.told:
            self.told = True
            self.say(problem)
        line = recovery_text(found)
        if line is not None and line != self.line:
            self.line = line
            self.say(line)


def progress_dirs(log_dir: str, environ: Mapping[str, str]) -> List[str]:
    """Where this host's shim reads its ranks' progress: its own folder, and the checkpoint folder's (shared by
    every host) when the job has one."""

    found = [os.path.join(log_dir, PROGRESS_DIR_NAME)]
    checkpoints = environ.get("MALAUNCH_CHECKPOINT_DIR")
    if checkpoints:
        found.append(os.path.join(checkpoints, ".progress"))
    return found
