"""The checkpoint folder's layout: the part of the contract that lives on disk (``MALAUNCH_CHECKPOINT_DIR``).

One sub-folder per checkpoint, named by the script. A checkpoint is *complete* once its folder holds the file
``.complete``, written last and atomically, whose text is a JSON object with ``step`` (a whole number >= 0) and,
optionally, ``time`` (seconds since the epoch) and ``ranks``. "Newest" is the largest ``step``, then the latest
``time``: recorded facts, never a folder's modification time. A ``.complete`` that is not such an object is
*damaged*: the folder is passed over like an incomplete one.

Inside an unfinished checkpoint the helper (:mod:`malaunch.entrypoint.checkpoint`) keeps ``.parts/rank-<R>``, one
file per rank that finished its part, holding the step, the save's attempt and the job's number of ranks; the rank
that finds every part of its own attempt there writes ``.complete`` (a hard link of a finished temporary file, so
exactly one rank does). Where each host's folder is its own, each host's shim writes it the same way once the
job's coordinator says the hosts together hold every part (:mod:`..run.hosts.saves`).
An incomplete folder's place in time is the step its parts record; without one, its files' newest modification
time against the newest complete checkpoint's marker.

Names starting with ``.`` are never checkpoints (temporary files, ``.progress``). Standard library only; read
defensively: a folder that vanishes while it is read is skipped.
"""

from __future__ import annotations

import json
import math
import os
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple, Union

__all__ = [
    "MARKER", "PARTS", "PROGRESS", "Found", "Marker", "folder_names", "marker_text", "newest", "parse_marker",
    "read_marker", "reached", "records", "scan",
]  # fmt: skip

MARKER = ".complete"
PARTS = ".parts"  # in an unfinished checkpoint: one file per rank that finished its part
PROGRESS = ".progress"  # in the checkpoint folder: each rank's last progress(step, total)
_MAX_MARKER = 65536  # bytes read of a marker


class Marker(NamedTuple):
    """What a complete checkpoint's ``.complete`` records."""

    step: int
    time: float
    ranks: int


class Found(NamedTuple):
    """One sub-folder of the checkpoint folder as found on disk.

    ``marker`` is set for a complete checkpoint; ``why`` says why any other is not (no marker, or how the marker
    is damaged). ``step`` is the marker's, or the step an incomplete one's parts record (None: not recorded);
    ``touched`` is the newest modification time of the folder and its files (used only without a step).
    """

    name: str
    path: str
    marker: Optional[Marker]
    why: str
    step: Optional[int]
    touched: float

    @property
    def complete(self) -> bool:
        return self.marker is not None

    def order(self) -> Tuple[int, float]:
        """The sort key of a complete checkpoint: its step, then its time."""
        assert self.marker is not None
        return (self.marker.step, self.marker.time)


def marker_text(step: int, when: float, ranks: int) -> str:
    """The text of ``.complete`` for a checkpoint of ``step`` made by ``ranks`` ranks at ``when``."""
    return json.dumps({"step": step, "time": round(when, 6), "ranks": ranks}) + "\n"


def read_marker(folder: str) -> Union[Marker, str, None]:
    """The marker of ``folder``: a :class:`Marker`, a line saying how it is damaged, or None when it has none."""
    path = os.path.join(folder, MARKER)
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_MARKER + 1)
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"its {MARKER} cannot be read ({error.strerror})"
    return parse_marker(data)


def parse_marker(data: bytes) -> Union[Marker, str]:
    """The marker a ``.complete`` holding ``data`` records, or a line saying how it is damaged (a folder on disk or
    an object in a bucket alike)."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        shown = data[:40].decode("utf-8", "replace")
        return f"its {MARKER} is damaged (not JSON: {shown!r})"
    step = value.get("step") if isinstance(value, dict) else None
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        return f"its {MARKER} is damaged (no whole-number 'step' >= 0: {str(value)[:60]!r})"
    when = value.get("time", 0.0)
    if isinstance(when, bool) or not isinstance(when, (int, float)) or not math.isfinite(when):
        when = 0.0
    ranks = value.get("ranks", 0)
    if isinstance(ranks, bool) or not isinstance(ranks, int):
        ranks = 0
    return Marker(step, float(when), ranks)


def records(folder: str, prefix: str = "", suffix: str = "") -> Iterator[Dict[str, object]]:
    """The small JSON records (at most 4 KiB each) of the files in ``folder`` whose names start with ``prefix`` and
    end with ``suffix``: the parts of a save, the ranks' progress. A missing folder, or a file that cannot be read
    or is no JSON object, gives nothing (read defensively: it may be half written by a rank that died)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(suffix)):
            continue
        try:
            with open(os.path.join(folder, name), "rb") as handle:
                value = json.loads(handle.read(4096).decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(value, dict):
            yield value


def _largest_step(found: Iterable[Dict[str, object]]) -> Optional[int]:
    steps = [step for step in (item.get("step") for item in found)
             if isinstance(step, int) and not isinstance(step, bool)]  # fmt: skip
    return max(steps) if steps else None


def _part_step(folder: str) -> Optional[int]:
    """The largest step the parts of an unfinished checkpoint record (None: none recorded)."""
    return _largest_step(records(os.path.join(folder, PARTS)))


def _touched(folder: str) -> float:
    """The newest modification time of ``folder`` and the entries right inside it."""
    newest = 0.0
    try:
        newest = os.stat(folder).st_mtime
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
                except OSError:
                    continue
    except OSError:
        pass
    return newest


def folder_names(directory: str) -> List[str]:
    """The names of ``directory``'s checkpoint sub-folders (not hidden, not links), sorted; none when it cannot be
    read."""
    try:
        with os.scandir(directory) as entries:
            return sorted(entry.name for entry in entries if not entry.name.startswith(".")
                          and entry.is_dir(follow_symlinks=False))  # fmt: skip
    except OSError:
        return []


def scan(directory: str) -> List[Found]:
    """Every checkpoint sub-folder of ``directory``, sorted by name (a missing folder: none)."""
    found = []
    for name in folder_names(directory):
        path = os.path.join(directory, name)
        marker = read_marker(path)
        if isinstance(marker, Marker):
            found.append(Found(name, path, marker, "", marker.step, _touched(path)))
        else:
            why = marker if marker is not None else f"it has no {MARKER} (a save that did not finish)"
            found.append(Found(name, path, None, why, _part_step(path), _touched(path)))
    return found


def newest(found: List[Found]) -> Optional[Found]:
    """The newest complete checkpoint of ``found`` (None: none is complete)."""
    complete = [item for item in found if item.marker is not None]
    return max(complete, key=Found.order) if complete else None


def reached(directory: str) -> Optional[int]:
    """The largest step any rank recorded with ``progress`` (``.progress/rank-<R>.json``); None: none recorded."""
    return _largest_step(records(os.path.join(directory, PROGRESS), suffix=".json"))
