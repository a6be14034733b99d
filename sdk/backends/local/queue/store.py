"""The local queue on disk, under ``<home>/queue/``: one file per waiting job, written atomically.

- ``<seq>-<job id>.json``: a waiting job (its need, priority, submit order); ``.starting`` while the scheduler
  starts it (a file left so by a scheduler that was killed is looked at again: started when a process of the job
  is found, else put back);
- ``lock``: held (``flock``) while the queue is read and changed and a job is started, so two callers never start
  more than fits;
- ``scheduler.lock``: held by the one scheduler for its whole life (the kernel lets it go when it dies, so the next
  caller takes over); ``reasons.json``: why each waiting job waits, for ``status`` and ``list``.

Every read is defensive: a damaged entry file is never fatal. Readers skip it; :meth:`QueueStore.damaged` names it
(its file name holds the job's place and id), and the scheduler rebuilds it from the job's plan or ends the job
saying why (:func:`.scheduler.repair`), so no job waits for ever behind a file nobody can read.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from typing import ContextManager, Dict, Iterator, List, NamedTuple, Optional, Tuple

from ....home import file_lock, write_json_atomic

__all__ = ["QueueEntry", "QueueStore", "plan_queue"]

_SUFFIX = ".json"
_STARTING = ".starting"
_NAME = re.compile(r"(\d{20})-(.+)\.(json|starting)\Z")  # an entry's file: <seq>-<job id><suffix>


class QueueEntry(NamedTuple):
    """A waiting job: ``need`` devices; the higher ``priority`` goes first, then the lower ``seq`` (submit order)."""

    job_id: str
    need: int
    priority: int
    seq: int
    submitted_at: float

    @property
    def order(self) -> Tuple[int, int, str]:
        return (-self.priority, self.seq, self.job_id)


def plan_queue(entries: List[QueueEntry], capacity: int, used: int) -> Tuple[List[QueueEntry], Dict[str, str]]:
    """Which waiting jobs start now, in order, and why each other one waits. Pure.

    Strict order: the first job that does not fit stops the ones behind it (no job jumps the queue but by
    ``priority``), so a big job is never starved by small ones.
    """
    free = capacity - used
    start: List[QueueEntry] = []
    reasons: Dict[str, str] = {}
    ahead = 0
    for entry in sorted(entries, key=lambda item: item.order):
        if ahead == 0 and entry.need <= free:
            start.append(entry)
            free -= entry.need
            continue
        plural = "s" if entry.need != 1 else ""
        reasons[entry.job_id] = (f"waiting for {entry.need} device{plural}: {max(free, 0)} free, {ahead} "
                                 f"job{'s' if ahead != 1 else ''} ahead")  # fmt: skip
        ahead += 1
    return start, reasons


class QueueStore:
    """The queue folder of one home."""

    def __init__(self, home: str) -> None:
        self.root = os.path.join(home, "queue")

    def _path(self, name: str) -> str:
        return os.path.join(self.root, name)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the queue's lock (blocking)."""
        os.makedirs(self.root, exist_ok=True)
        with file_lock(self._path("lock")):
            yield

    def scheduler_lock(self) -> ContextManager[bool]:
        """The scheduler's lock, not waited for: the context gives whether it is held (another scheduler: no)."""
        os.makedirs(self.root, exist_ok=True)
        return file_lock(self._path("scheduler.lock"), wait=False)

    def scheduler_running(self) -> bool:
        """Whether a scheduler holds its lock now."""
        with self.scheduler_lock() as held:
            return not held

    def _files(self) -> List[str]:
        try:
            return sorted(os.listdir(self.root))
        except OSError:
            return []

    def entries(self, starting: bool = False) -> List[QueueEntry]:
        """The waiting jobs (with ``starting``: those a killed scheduler left half-started), in queue order."""
        suffix = _STARTING if starting else _SUFFIX
        found: List[QueueEntry] = []
        for name in self._files():
            if not name.endswith(suffix) or not name[:1].isdigit():
                continue
            entry = _read_entry(self._path(name))
            if entry is not None:
                found.append(entry)
        return sorted(found, key=lambda item: item.order)

    def damaged(self) -> List[Tuple[str, int, str]]:
        """The entry files (waiting or starting) that cannot be read: ``(path, seq, job id)`` from each one's name."""
        found: List[Tuple[str, int, str]] = []
        for name in self._files():
            named = _NAME.match(name)
            if named is not None and _read_entry(self._path(name)) is None:
                found.append((self._path(name), int(named.group(1)), named.group(2)))
        return found

    def rewrite(self, entry: QueueEntry, path: str) -> None:
        """Write ``entry`` over its damaged file ``path`` (waiting or starting: it stays so)."""
        write_json_atomic(path, entry._asdict())

    def entry_name(self, entry: QueueEntry, suffix: str = _SUFFIX) -> str:
        return self._path(f"{entry.seq:020d}-{entry.job_id}{suffix}")

    def add(self, job_id: str, need: int, priority: int) -> QueueEntry:
        """Queue ``job_id`` (call with the lock held)."""
        entry = QueueEntry(job_id, need, priority, time.time_ns(), time.time())
        write_json_atomic(self.entry_name(entry), entry._asdict())
        return entry

    def find(self, job_id: str) -> Optional[Tuple[QueueEntry, str]]:
        """``job_id``'s entry and its file (waiting or starting), or None."""
        for name in self._files():
            stem = name.rsplit(".", 1)[0]
            if name.endswith((_SUFFIX, _STARTING)) and name[:1].isdigit() and stem.split("-", 1)[-1] == job_id:
                entry = _read_entry(self._path(name))
                if entry is not None:
                    return entry, self._path(name)
        return None

    def claim(self, entry: QueueEntry) -> str:
        """Mark ``entry`` as being started (an atomic rename); its new file."""
        target = self.entry_name(entry, _STARTING)
        os.replace(self.entry_name(entry), target)
        return target

    def put_back(self, entry: QueueEntry) -> None:
        """A half-started entry waits again, in its place."""
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.entry_name(entry, _STARTING), self.entry_name(entry))

    def remove(self, path: str) -> bool:
        """Remove an entry file; False when it was already gone."""
        try:
            os.unlink(path)
            return True
        except FileNotFoundError:
            return False

    def mark_running(self, job_id: str, need: int) -> None:
        """Note a started job and its need (``running/<job id>``), so that counting what is used reads the jobs
        that run, not every job of the home."""
        os.makedirs(self._path("running"), exist_ok=True)
        write_json_atomic(os.path.join(self._path("running"), job_id), {"need": need})

    def running(self) -> Dict[str, int]:
        """The started jobs noted, and their needs."""
        folder = self._path("running")
        found: Dict[str, int] = {}
        try:
            names = os.listdir(folder)
        except OSError:
            return found
        for name in names:
            if name.startswith("."):
                continue
            try:
                with open(os.path.join(folder, name), encoding="utf-8") as handle:
                    need = json.load(handle).get("need")
            except (OSError, ValueError, AttributeError):
                need = None
            found[name] = need if isinstance(need, int) and not isinstance(need, bool) and need > 0 else 1
        return found

    def forget_running(self, job_id: str) -> None:
        self.remove(os.path.join(self._path("running"), job_id))

    def write_capacity(self, devices: int) -> None:
        """The capacity the last submitter found (its profile's ``local.capacity`` counts): the scheduler's."""
        with contextlib.suppress(OSError):
            write_json_atomic(self._path("capacity.json"), {"devices": devices})

    def capacity(self) -> Optional[int]:
        try:
            with open(self._path("capacity.json"), encoding="utf-8") as handle:
                value = json.load(handle).get("devices")
        except (OSError, ValueError, AttributeError):
            return None
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    def write_reasons(self, reasons: Dict[str, str]) -> None:
        with contextlib.suppress(OSError):
            write_json_atomic(self._path("reasons.json"), reasons)

    def reason(self, job_id: str) -> Optional[str]:
        """Why ``job_id`` waits, as last written; None when it is not queued."""
        if self.find(job_id) is None:
            return None
        try:
            with open(self._path("reasons.json"), encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            data = {}
        said = data.get(job_id) if isinstance(data, dict) else None
        return said if isinstance(said, str) else "waiting in the local queue"


def _read_entry(path: str) -> Optional[QueueEntry]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        entry = QueueEntry(str(data["job_id"]), int(data["need"]), int(data["priority"]), int(data["seq"]),
                           float(data["submitted_at"]))  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return entry
