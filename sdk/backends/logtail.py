"""Read and follow several log files as one stream of prefixed lines (``[host 0] ...``).

``follow_files`` polls: it yields every complete new line as it appears, and once ``ended()`` is true it
drains what is left (including a last line without a newline) and stops. Files that do not exist yet are
simply empty. Bytes are decoded as UTF-8 with replacement, so a rank printing binary cannot break a reader.
"""

from __future__ import annotations

import time
from typing import Callable, Dict, Iterator, List, Sequence, Tuple

__all__ = ["follow_files", "read_files"]

Source = Tuple[str, str]  # (prefix, path)
_POLL = 0.1
_CHUNK = 1 << 16


def _decode(prefix: str, raw: bytes) -> str:
    return prefix + raw.rstrip(b"\r").decode("utf-8", errors="replace")


def read_files(sources: Sequence[Source]) -> Iterator[str]:
    """Every line of every file, file after file."""
    for prefix, path in sources:
        try:
            with open(path, "rb") as handle:
                for raw in handle:
                    yield _decode(prefix, raw.rstrip(b"\n"))
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
) -> Iterator[str]:
    """New lines of all files as they are written, until ``ended()`` and everything is read."""
    offsets: Dict[str, int] = {path: 0 for _, path in sources}
    partial: Dict[str, bytes] = {path: b"" for _, path in sources}
    while True:
        finished = ended()  # read the flag first: output written before the end is then always drained
        while True:
            got_any = False
            for prefix, path in sources:
                data = _read_new(path, offsets[path])
                if not data:
                    continue
                got_any = True
                offsets[path] += len(data)
                lines: List[bytes] = (partial[path] + data).split(b"\n")
                partial[path] = lines.pop()
                for raw in lines:
                    yield _decode(prefix, raw)
            if not got_any:
                break
        if finished:
            for prefix, path in sources:
                if partial[path]:
                    yield _decode(prefix, partial[path])
            return
        sleep(poll)
