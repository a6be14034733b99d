"""Saves that complete through the coordinator: each host's checkpoint folder may be its own.

The helper (:mod:`malaunch.entrypoint.checkpoint`) records each rank's part of a save in
``<checkpoint>/.parts/rank-<R>`` (its step, its attempt, the job's number of ranks) and the rank that finds every
rank's part of its attempt writes ``.complete``. Where each host's folder is its own (ModelArts: an output channel
per node), no rank ever finds them all; so every host's shim completes what its ranks cannot:

1. :class:`SaveWatch` (each host, while its attempts run) looks at its own folder every :data:`POLL` seconds (and
   once more before it says its attempt is over). For each unfinished checkpoint it takes the parts of the running
   attempt written since that attempt started on this host (a part of an older attempt, or left by an earlier run
   of the job, never counts) and tells the coordinator which ranks' parts it holds (``parts``), each time that set
   grows. A report sent while the link was down (or lost with the connection) is not lost for good: each time the
   host joins the coordinator again it reports every unfinished checkpoint of that attempt once more
   (:meth:`SaveWatch.joined`); the coordinator adds a repeat up as nothing new.
2. :class:`SaveBook` (the coordinator, pure) adds up the hosts' reports of the running attempt; once together they
   hold every rank's part (the job's number of ranks as the parts record it), it tells every host (``saved``).
3. Each host that reported that checkpoint writes ``.complete`` in its own folder, whole and once (a hard link of a
   finished file, as the helper does; nothing when it is there already), if its folder still holds the parts it
   reported. It does so on the link's thread, as the message arrives: before any ``start`` of a later attempt.
4. The coordinator remembers the newest checkpoint it said ``saved`` for (the job's resume point) and names it in
   every ``start`` (``resume``). Before that attempt starts, each host makes its folder agree
   (:meth:`SaveWatch.agree`): a host that missed the ``saved`` (its connection was down, or its marker write
   failed) writes the marker then, if its folder still holds every part it reported of that checkpoint; its ranks
   are given that checkpoint as ``MALAUNCH_RESUME_FROM`` (a complete checkpoint newer than it on this host is
   passed over, never removed). A host that cannot hold it (the parts gone, a marker of another step, a host
   that never reported it) starts no rank: it says so in one line naming the host, the checkpoint and its step,
   and the job ends with exit 2 (class ``launcher_misuse``), never resuming silently from an older one. Without
   a ``resume`` (no save completed in the job yet) each host resumes from the newest complete checkpoint of its
   own folder, as on one host. Each host remembers the newest checkpoint it heard complete (a ``saved``, or a
   ``start``'s ``resume``: :meth:`SaveWatch.heard`) and names it in every hello, so that a coordinator that
   replaced a lost one (the master host replaced) names it too.

Where the folder is shared (the local backend, a Volcano claim) the same happens: each host reports the parts it
sees, the coordinator completes when all are there, and the rank that wrote the last part has normally written
``.complete`` already (the shim's write is then nothing; its parts are still reported, so that the coordinator's
resume point is that checkpoint). A rank killed in the middle of a save leaves its part missing: no host ever
writes ``.complete`` for that checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from typing import Callable, Dict, FrozenSet, List, NamedTuple, Optional, Set, Tuple

from ...contract.checkpoint_dir import MARKER, PARTS, Marker, folder_names, marker_text, read_marker
from .jobstate import JobState, Send
from .members import members_text, read_members
from .messages import Parts, Resume, Saved

__all__ = ["POLL", "HeldParts", "Reported", "SaveBook", "SaveWatch", "held_parts", "write_marker"]

POLL = 0.5  # seconds between two looks at the host's checkpoint folder
_RECORD = 4096  # bytes read of a part, as the helper's reader reads one
_MAX_OPEN = 4096  # unfinished checkpoints the coordinator follows in one attempt, at most
#: Seconds a part's modification time may read before its attempt's start and still count: a file system that keeps
#: whole seconds (or a server's clock a little behind) must not hide a fresh part; a part of the same attempt number
#: left by an earlier run of the job is older than that (a shim's start takes longer).
_SLACK = 2.0
_HISTORY = 256  # checkpoints a host remembers having reported (the newest steps), across its attempts


class HeldParts(NamedTuple):
    """The parts of one unfinished checkpoint this host's folder holds for one attempt."""

    name: str  # the checkpoint's folder (a sub-folder of the checkpoint folder)
    step: int
    size: int  # the job's number of ranks, as the parts record it
    ranks: FrozenSet[int]


class Reported(NamedTuple):
    """What a host told the coordinator of one checkpoint: of which attempt (started on this host at ``since``),
    the job's number of ranks, and the ranks whose parts its folder held."""

    attempt: int
    since: float
    size: int
    ranks: FrozenSet[int]


def _part(path: str, since: float) -> Optional[Dict[str, object]]:
    """A part's record when its file was written at or after ``since`` (None: older, unreadable, not JSON)."""
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_mtime < since:
                return None
            value = json.loads(handle.read(_RECORD).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _whole(value: object) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _attempt_of(value: object) -> Optional[int]:
    """The shim's attempt a part's ``attempt`` (``K.T``: the shim's, then torchrun's own count) names."""
    head = value.partition(".")[0] if isinstance(value, str) else ""
    return int(head) if head.isdigit() else None


def held_parts(directory: str, attempt: int, since: float) -> List[HeldParts]:
    """The unfinished checkpoints of ``directory`` with parts of ``attempt`` written since ``since`` (seconds since
    the epoch), one entry per checkpoint and step (read defensively: what cannot be read counts nothing)."""
    found: List[HeldParts] = []
    for name in folder_names(directory):
        folder = os.path.join(directory, name)
        if _marked_before(os.path.join(folder, MARKER), since):
            continue  # complete before the attempt started: no part of it is there
        try:
            files = os.listdir(os.path.join(folder, PARTS))
        except OSError:
            continue
        groups: Dict[Tuple[int, int], Set[int]] = {}
        for file in files:
            record = _part(os.path.join(folder, PARTS, file), since) if file.startswith("rank-") else None
            if record is None or _attempt_of(record.get("attempt")) != attempt:
                continue
            step, size, rank = (_whole(record.get(key)) for key in ("step", "ranks", "rank"))
            if step is not None and size and rank is not None and rank < size:
                groups.setdefault((step, size), set()).add(rank)
        found += [HeldParts(name, step, size, frozenset(ranks)) for (step, size), ranks in sorted(groups.items())]
    return found


def _marked_before(path: str, since: float) -> bool:
    """Whether ``path`` (a checkpoint's marker) was written before ``since`` (a missing one was not)."""
    try:
        return os.lstat(path).st_mtime < since
    except OSError:
        return False


def _fits(name: str, size: int, ranks: Tuple[int, ...]) -> bool:
    """Whether a ``parts`` message of these reads back on the coordinator (a checkpoint's folder of at most 255
    characters, at most 2^20 ranks, ranks that travel as ranges or packed): one it would refuse as malformed would
    cost this host its connection, so that save stays incomplete instead (the safe side)."""
    return 0 < len(name) <= 255 and 0 < size <= 1 << 20 and read_members(members_text(ranks)) == ranks


def write_marker(folder: str, step: int, ranks: int) -> bool:
    """Write ``folder``'s ``.complete`` whole, once: a finished temporary file linked to its name. False when it was
    there already (or the folder cannot take it)."""
    temp = os.path.join(folder, f".complete-shim-{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            handle.write(marker_text(step, time.time(), ranks))
            handle.flush()
            os.fsync(handle.fileno())
        os.link(temp, os.path.join(folder, MARKER))
        return True
    except OSError:  # FileExistsError: another writer (a rank, or the shim of a host sharing the folder) was first
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


class SaveWatch:
    """A host's watch of its own checkpoint folder (see the module's docstring): reports through ``send``, writes
    ``.complete`` on the coordinator's ``saved`` (:meth:`saved`, called on the link's thread). ``directory`` None
    (the job has no checkpoint folder): it does nothing."""

    def __init__(self, directory: Optional[str], send: Callable[[Parts], None], say: Callable[[str], None]) -> None:
        self.directory, self.send, self.say = directory, send, say
        self._lock = threading.Lock()  # the state below (the link's thread reads it in saved())
        self._looking = threading.Lock()
        self._attempt: Optional[int] = None  # the running attempt (None: none runs)
        self._since = 0.0  # when it started on this host
        self._told: Dict[Tuple[str, int], FrozenSet[int]] = {}  # (checkpoint, step) -> the ranks reported
        self._reported: Dict[Tuple[str, int], Reported] = {}  # the same, of every attempt (the newest steps)
        self._heard: Optional[Resume] = None  # the newest checkpoint the coordinator said complete (or resumed from)
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="malaunch-savewatch", daemon=True)

    def start(self) -> SaveWatch:
        if self.directory is not None:
            self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._thread.is_alive():
            self._thread.join(2.0)

    def begin(self, attempt: int) -> None:
        """Attempt ``attempt`` starts on this host now (before its ranks)."""
        with self._lock:
            self._attempt, self._since, self._told = attempt, time.time() - _SLACK, {}

    def flush(self) -> None:
        """One look now (the attempt's ranks are gone: before this host says its attempt is over)."""
        self._look()

    def joined(self) -> None:
        """The link joined the coordinator (again; called on the link's thread before it reads a command): report
        every unfinished checkpoint of the running (or last) attempt this folder holds, reported before or not.
        What was sent while the link was down, or lost with its connection, reaches the coordinator this way while
        it still follows that attempt (the back-off before the next attempt, 1 s by default, leaves it the time);
        one that comes after the next ``start`` counts nothing, as before: the resume point lags, never leads."""
        with self._lock:
            self._told = {}
        self._look()

    def _run(self) -> None:
        while not self._closing.wait(POLL):
            self._look()

    def _look(self) -> None:
        with self._looking:  # one look at a time, its reports sent before it returns (flush's promise)
            news: List[Parts] = []
            with self._lock:
                attempt, directory = self._attempt, self.directory
                if attempt is None or directory is None:
                    return
                for held in held_parts(directory, attempt, self._since):
                    key, ranks = (held.name, held.step), tuple(sorted(held.ranks))
                    if self._told.get(key) != held.ranks and _fits(held.name, held.size, ranks):
                        self._told[key] = held.ranks
                        self._remember(key, Reported(attempt, self._since, held.size, held.ranks))
                        news.append(Parts(attempt, held.name, held.step, held.size, ranks))
            for message in news:  # outside the state's lock: a send may wait for a slow coordinator
                self.send(message)

    def heard(self) -> Optional[Resume]:
        """The newest checkpoint a coordinator of the job said complete to this host, or named as the one to resume
        from (None: none yet); read on the link's thread for each hello."""
        with self._lock:
            return self._heard

    def _hear(self, resume: Resume) -> None:  # the state's lock held
        if self._heard is None or resume.step > self._heard.step:
            self._heard = resume

    def _remember(self, key: Tuple[str, int], reported: Reported) -> None:
        self._reported.pop(key, None)
        self._reported[key] = reported
        if len(self._reported) > _HISTORY:
            del self._reported[min(self._reported, key=lambda item: item[1])]

    def agree(self, resume: Optional[Resume], host: str) -> Optional[str]:
        """Before an attempt that resumes from ``resume`` (the coordinator's word; see the module's docstring, 4):
        write its marker here if this host missed the ``saved`` and still holds every part it reported. None when
        this host's folder holds it complete; else the line that says why it cannot and what to do (``host`` names
        this host)."""
        directory = self.directory
        if directory is None or resume is None:  # no folder, or no save completed since the coordinator started
            return None
        folder = os.path.join(directory, resume.name)
        with self._lock:
            self._hear(resume)
            reported = self._reported.get((resume.name, resume.step))
            marker = read_marker(folder)
            if marker is None and reported is not None and _holds(directory, resume, reported):
                if write_marker(folder, resume.step, reported.size):
                    self.say(f"checkpoint {folder} complete: this host holds its ranks' parts of step {resume.step} "
                             f"({reported.size} ranks), which the job's coordinator found complete while this host "
                             "did not hear it")  # fmt: skip
                marker = read_marker(folder)
        if isinstance(marker, Marker) and marker.step == resume.step:
            return None
        if isinstance(marker, Marker):
            why = f"its .complete records step {marker.step}"
        elif marker is not None:
            why = marker
        elif reported is None:
            why = "it has no .complete, and this host's shim reported none of its parts (a host replaced since?)"
        else:
            why = "it has no .complete, and the parts this host reported of it are gone"
        return (f"{host} cannot resume from checkpoint {folder} (step {resume.step}), the "
                f"newest the job's hosts completed together: {why}; its ranks would start from another step than "
                "the other hosts' ranks, so none starts: restore that folder on this host, or start the job again "
                "from a checkpoint every host holds (ma-submit checkpoints JOB_ID lists them; --resume-from)")

    def saved(self, message: Saved) -> None:
        """The coordinator found every rank's part of a checkpoint: write its ``.complete`` here if this host
        reported parts of it and its folder still holds them."""
        with self._lock:
            self._hear(Resume(message.name, message.step))  # complete on every host's part, whatever follows here
            told, directory = self._told.get((message.name, message.step)), self.directory
            if message.attempt != self._attempt or not told or directory is None:
                return
            now = {held.ranks for held in held_parts(directory, message.attempt, self._since)
                   if held.name == message.name and held.step == message.step and held.size == message.size}
            if not any(ranks >= told for ranks in now):
                return
            folder = os.path.join(directory, message.name)
            if write_marker(folder, message.step, message.size):
                self.say(f"checkpoint {folder} complete: every host holds its ranks' parts of step {message.step} "
                         f"({message.size} ranks)")  # fmt: skip


def _holds(directory: str, resume: Resume, reported: Reported) -> bool:
    """Whether ``directory`` still holds every part this host reported of checkpoint ``resume``."""
    return any(held.name == resume.name and held.step == resume.step and held.size == reported.size
               and held.ranks >= reported.ranks
               for held in held_parts(directory, reported.attempt, reported.since))  # fmt: skip


class SaveBook:
    """The coordinator's account of the running attempt's saves (pure): which ranks' parts each host holds. Each save
    completed becomes ``state``'s resume point when it is the newest (:attr:`JobState.resume`)."""

    def __init__(self, state: Optional[JobState] = None) -> None:
        self.state = state
        self.attempt = -1
        self.held: Dict[Tuple[str, int, int], Dict[int, FrozenSet[int]]] = {}  # (name, step, size) -> host -> ranks
        self.done: Set[Tuple[str, int, int]] = set()

    def parts(self, attempt: int, host: int, message: Parts) -> List[Send]:
        """Host ``host`` holds ``message``'s parts; ``attempt``: the job's running (or last) attempt. A ``saved``
        for every host once the hosts together hold every rank's part (once per checkpoint)."""
        if attempt != self.attempt:
            self.attempt, self.held, self.done = attempt, {}, set()
        if message.attempt != attempt:
            return []
        key = (message.name, message.step, message.size)
        if key in self.done or (key not in self.held and len(self.held) >= _MAX_OPEN):
            return []
        hosts = self.held.setdefault(key, {})
        hosts[host] = hosts.get(host, frozenset()) | frozenset(message.ranks)
        if len(set().union(*hosts.values())) < message.size:
            return []
        self.done.add(key)
        del self.held[key]
        state = self.state
        if state is not None and (state.resume is None or message.step >= state.resume.step):
            state.resume = Resume(message.name, message.step)
        return [Send(None, Saved(attempt, message.name, message.step, message.size))]

    def heard(self, resume: Optional[Resume]) -> None:
        """A host's hello names ``resume``, the newest save it heard a coordinator of the job say complete (or name to
        resume from): the job's resume point when it is newer than ``state``'s (a coordinator that replaced a lost
        one learns it so; :attr:`JobState.resume`)."""
        state = self.state
        if state is not None and resume is not None and (state.resume is None or resume.step > state.resume.step):
            state.resume = resume
