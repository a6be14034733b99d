"""Read and follow several hosts' log files as one stream of lines, each host named in the line's one prefix
(``[host 0 rank 1] ...``, :mod:`.lineprefix`).

``follow_files`` yields every complete new line as it appears, and once ``ended()`` is true it drains what is
left (including a last line without a newline) and stops. It reads the files again when a
:class:`~.filewatch.ChangeWatch` says they changed (at once, and never while nothing happens), or every
``poll`` seconds without one. Files that do not exist yet are simply empty. Bytes are decoded as UTF-8 with
replacement, so a rank printing binary cannot break a reader.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, TypeAlias

from .lineprefix import host_line

if TYPE_CHECKING:
    from .filewatch import ChangeWatch

__all__ = ["follow_files", "read_files"]

Source: TypeAlias = "Tuple[int, str]"  # (host index, path)
_POLL = 0.1
_CHECK_EVERY = 0.5  # with a watch: how often ended() is asked while only logs (or nothing) changed
_CHUNK = 1 << 16


def _decode(host: int, raw: bytes) -> str:
    return host_line(host, raw.rstrip(b"\r").decode("utf-8", errors="replace"))


def read_files(sources: Sequence[Source]) -> Iterator[str]:
    """Every line of every file, file after file."""
    for host, path in sources:
        try:
            with open(path, "rb") as handle:
                for raw in handle:
                    yield _decode(host, raw.rstrip(b"\n"))
        except OSError:
            continue


def _read_new(path: str, offset: int) -> bytes:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read(_CHUNK)
    except OSError:
        return b""


def follow_files(
    sources: Sequence[Source],
    ended: Callable[[], bool],
    *,
    poll: float = _POLL,
    sleep: Callable[[float], None] = time.sleep,
    watch: Optional[ChangeWatch] = None,
    check_every: float = _CHECK_EVERY,
) -> Iterator[str]:
    """New lines of all files as they are written, until ``ended()`` and everything is read.

    Without ``watch`` the files are read every ``poll`` seconds and ``ended()`` asked each time. With a
    :class:`~.filewatch.ChangeWatch` of the files (and of whatever else ends the job, e.g. its state file) the
    files are read as soon as they change, and ``ended()`` is asked when a watched file that is not a log
    changed, when the watch cannot tell what changed, and at least every ``check_every`` seconds; the files are
    read then too, so a filesystem whose changes the kernel does not report is still followed, only later.
    """
    offsets: Dict[str, int] = {path: 0 for _, path in sources}
    partial: Dict[str, bytes] = {path: b"" for _, path in sources}
    logs = frozenset(os.path.abspath(path) for _, path in sources)
    ask = True
    finished = False
    next_check = 0.0
    while True:
        if ask:  # read the flag first: output written before the end is then always drained
            finished = ended()
            next_check = time.monotonic() + check_every
        while True:
            got_any = False
            for host, path in sources:
                data = _read_new(path, offsets[path])
                if not data:
                    continue
                got_any = True
                offsets[path] += len(data)
                lines: List[bytes] = (partial[path] + data).split(b"\n")
                partial[path] = lines.pop()
                for raw in lines:
                    yield _decode(host, raw)
            if not got_any:
                break
        if finished:
            for host, path in sources:
                if partial[path]:
                    yield _decode(host, partial[path])
            return
        if watch is None:
            sleep(poll)
            continue
        changed = watch.wait(max(0.0, next_check - time.monotonic()))
        ask = changed is None or not changed <= logs or time.monotonic() >= next_check
