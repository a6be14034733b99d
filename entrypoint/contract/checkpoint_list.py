"""What a checkpoint folder holds, for people and for a new job: one row per checkpoint, and where a job resumes.

Both read a folder laid out as :mod:`.checkpoint_dir` says, and nothing else, so every backend that can see the
folder (the local one on its disk; a cloud one once it has the files) lists and checks it with the same code:

- :func:`list_checkpoints`: every checkpoint sub-folder as a :class:`CheckpointRow` (name, step where known,
  time, size, and its state: ``complete``, ``no marker``, ``damaged marker`` or ``being written``, with why it
  is not complete), oldest first (``ma-submit checkpoints``).
- :func:`checkpoint_rows` and :func:`found_of`: the same rows from what another store holds (a bucket's objects:
  each checkpoint's marker bytes, its parts' records, its size and time), so a listing of OBS reads as one of a
  folder. A store that gathers several hosts' folders (OBS, where every ModelArts node uploads its own) also says
  which ranks' parts it holds: a marker there counts only with the part of every rank it records (state
  ``parts missing`` until they all arrived), unless the checkpoint has no ``.parts`` at all (the script wrote its
  own marker).
- :func:`resume_point`: what ``MALAUNCH_RESUME_SOURCE`` names, checked: a checkpoint folder must be complete; any
  other folder is a checkpoint folder of another job, whose newest complete checkpoint is meant. Either gives the
  complete checkpoint's :class:`~.checkpoint_dir.Found`, or a line saying why there is none.

A folder is a single checkpoint (not a folder of them) when it holds ``.complete`` or ``.parts`` (the helper's
unfinished save). Standard library only; read defensively (a file that vanishes while it is read counts nothing).
"""

from __future__ import annotations

import os
from typing import Collection, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Set, Union

from .checkpoint_dir import MARKER, PARTS, Found, Marker, newest, parse_marker, read_marker, scan

__all__ = ["BEING_WRITTEN", "COMPLETE", "DAMAGED", "NO_MARKER", "PARTS_MISSING", "STATES", "CheckpointRow",
           "checkpoint_rows", "folder_size", "found_of", "list_checkpoints", "resume_point"]  # fmt: skip

COMPLETE = "complete"
NO_MARKER = "no marker"  # a save that did not finish (or a folder the script never marked)
DAMAGED = "damaged marker"  # its .complete is there but cannot be read as one
BEING_WRITTEN = "being written"  # no marker yet, newer than every complete one, and the job still runs
PARTS_MISSING = "parts missing"  # a store of several hosts' folders has its marker, not every rank's part yet
STATES = (COMPLETE, NO_MARKER, DAMAGED, BEING_WRITTEN, PARTS_MISSING)
_MISSING = "the parts of rank"  # how the why of a checkpoint whose parts are missing starts


class CheckpointRow(NamedTuple):
    """One checkpoint sub-folder as ``ma-submit checkpoints`` shows it.

    ``step``: the marker's, else the step its parts record (None: unknown). ``time``: the marker's time, else its
    files' newest modification time (seconds since the epoch). ``size``: bytes of every file under it. ``why``:
    empty when complete, else why it is not.
    """

    name: str
    path: str
    step: Optional[int]
    time: float
    size: int
    state: str
    why: str

    @property
    def complete(self) -> bool:
        return self.state == COMPLETE

    def to_json(self) -> Dict[str, object]:
        return {"name": self.name, "path": self.path, "step": self.step, "time": round(self.time, 3),
                "size": self.size, "complete": self.complete, "state": self.state, "why": self.why}  # fmt: skip


def folder_size(path: str) -> int:
    """Bytes of every regular file under ``path`` (links not followed; what cannot be read counts 0)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                stat = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if not os.path.islink(os.path.join(root, name)):
                total += stat.st_size
    return total


def _state(item: Found, best: Optional[Found], running: bool) -> str:
    if item.complete:
        return COMPLETE
    if item.why.startswith(f"its {MARKER}"):
        return DAMAGED
    if item.why.startswith(_MISSING):
        return PARTS_MISSING
    newer = best is None or (item.step >= best.order()[0] if item.step is not None else item.touched >= best.touched)
    return BEING_WRITTEN if running and newer else NO_MARKER


def list_checkpoints(directory: str, *, running: bool = False) -> List[CheckpointRow]:
    """Every checkpoint sub-folder of ``directory``, oldest first (by step where known, then time, then name).

    ``running``: whether the job that writes the folder still runs (an unmarked folder newer than every complete
    one is then ``being written``, not ``no marker``). A missing folder lists nothing."""
    found = scan(directory)
    return checkpoint_rows(found, {item.path: folder_size(item.path) for item in found}, running=running)


def found_of(name: str, path: str, marker: Optional[bytes], parts: Iterable[Mapping[str, object]],
             touched: float, holders: Optional[Collection[int]] = None) -> Found:  # fmt: skip
    """One checkpoint as any store holds it (a bucket's objects as well as a folder): the bytes of its
    ``.complete`` (None: it has none; a reader takes its first 64 KiB, as :func:`.checkpoint_dir.read_marker`
    does), the records of its ``.parts`` and its newest modification time. ``holders``: the ranks whose part
    (``.parts/rank-<R>``) a store of several hosts' folders holds; a marker that records ``ranks`` then counts only
    with every one of them (None: not checked: one host's disk, where each host's folder may be its own, or a
    checkpoint without ``.parts``, whose marker the script wrote itself)."""
    if marker is not None:
        parsed = parse_marker(marker)
        if isinstance(parsed, Marker):
            return _with_parts(Found(name, path, parsed, "", parsed.step, touched), holders)
        why = parsed
    else:
        why = f"it has no {MARKER} (a save that did not finish)"
    steps = [step for step in (part.get("step") for part in parts)
             if isinstance(step, int) and not isinstance(step, bool)]  # fmt: skip
    return Found(name, path, None, why, max(steps) if steps else None, touched)


def checkpoint_rows(found: Sequence[Found], sizes: Mapping[str, int], *, running: bool = False) -> List[CheckpointRow]:
    """The rows of the checkpoints ``found`` (``sizes``: bytes per path), oldest first; see
    :func:`list_checkpoints`. Pure: a backend that lists a bucket gives what it found there."""
    best = newest(list(found))
    rows = []
    for item in found:
        state = _state(item, best, running)
        when = item.marker.time if item.marker is not None and item.marker.time else item.touched
        why = "" if state == COMPLETE else item.why
        if state == BEING_WRITTEN:
            why = f"{why}; the job still runs, so its save may still be under way"
        rows.append(CheckpointRow(item.name, item.path, item.step, when, sizes.get(item.path, 0), state, why))
    rows.sort(key=lambda row: (row.step if row.step is not None else -1, row.time, row.name))
    return rows


def _held_ranks(path: str) -> Optional[Set[int]]:
    """The ranks whose part (``.parts/rank-<R>``) checkpoint folder ``path`` holds; None when it has no ``.parts``
    (a script's own marker: it counts alone)."""
    try:
        names = os.listdir(os.path.join(path, PARTS))
    except OSError:
        return None
    return {int(name[5:]) for name in names if name.startswith("rank-") and name[5:].isdigit()}


def _with_parts(item: Found, holders: Optional[Collection[int]]) -> Found:
    """``item``, not complete when its marker records ranks of which ``holders`` (None: not checked) lacks a part."""
    marker = item.marker
    missing = [rank for rank in range(marker.ranks) if rank not in holders] if marker and holders is not None else []
    if marker is None or not missing:
        return item
    shown = ", ".join(map(str, missing[:8])) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
    why = (f"{_MISSING}(s) {shown} of its {marker.ranks} are not there though its {MARKER} is (another host's "
           "upload may not have arrived yet)")  # fmt: skip
    return Found(item.name, item.path, None, why, marker.step, item.touched)


def _whole(item: Found) -> Found:
    """``item`` as a folder gathered from several hosts' folders reads: a marker counts with every rank's part."""
    return _with_parts(item, _held_ranks(item.path)) if item.marker is not None and item.marker.ranks else item


def _is_checkpoint(path: str) -> bool:
    return os.path.lexists(os.path.join(path, MARKER)) or os.path.isdir(os.path.join(path, PARTS))


def resume_point(source: str, *, one: bool = False) -> Union[Found, str]:
    """The complete checkpoint ``source`` names: itself when it is a checkpoint folder (``one``: it is meant as one,
    whatever it holds), else the newest complete one in it. A line saying why there is none when it is missing,
    incomplete, damaged or holds no complete one. ``source`` is another job's folder as a store gathered it from
    every host (ModelArts downloads what every node uploaded): a marker counts only with every rank's part."""
    if not os.path.isdir(source):
        return f"{source} is not a folder ({'missing' if not os.path.lexists(source) else 'not a directory'})"
    if one or _is_checkpoint(source):
        marker = read_marker(source)
        if marker is None:
            return f"checkpoint {source} is not complete: it has no {MARKER} (a save that did not finish)"
        if isinstance(marker, str):
            return f"checkpoint {source} is not complete: {marker}"
        name = os.path.basename(os.path.normpath(source))
        item = _whole(Found(name, source, marker, "", marker.step, marker.time))
        return item if item.complete else f"checkpoint {source} is not complete: {item.why}"
    found = [_whole(item) for item in scan(source)]
    best = newest(found)
    if best is not None:
        return best
    if not found:
        return f"{source} holds no checkpoint"
    reasons = "; ".join(f"{item.name}: {item.why}" for item in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return f"{source} holds no complete checkpoint ({reasons}{more})"
