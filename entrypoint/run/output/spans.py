"""The spans of a log file that its console copy has yet to read, kept compactly: lag costs little memory.

A span is a piece of one stream's output: bytes ``start:end`` of the log file, or bytes read from the pipe
after a fallback (``data``). Adjacent file spans of one stream merge, so a queue holds one entry per switch
between stdout and stderr. Entries are three machine integers in arrays (24 bytes each, against ~80 for a
Python object), so :data:`MAX_SPANS` switches waiting for a slow console cost at most a few MiB.
"""

from __future__ import annotations

import array
import collections
from typing import Deque, NamedTuple, Optional

__all__ = ["MAX_MEMORY", "MAX_SPANS", "Span", "SpanQueue"]

MAX_SPANS = 1 << 18  # spans waiting for the console reader (~6 MiB); beyond this the oldest are dropped
MAX_MEMORY = 16 << 20  # bytes of in-memory spans (after a fallback) waiting for the reader
_COMPACT = 1 << 12


class Span(NamedTuple):
    """One span: ``stream`` (0 stdout, 1 stderr), file bytes ``start:end``, or ``data`` (then 0:len)."""

    stream: int
    start: int
    end: int
    data: Optional[bytes] = None


class SpanQueue:
    """First in, first out; not thread-safe (its owner holds a lock)."""

    def __init__(self) -> None:
        self._starts = array.array("q")
        self._ends = array.array("q")
        self._kinds = array.array("b")  # the stream, + 2 for an in-memory span
        self._data: Deque[bytes] = collections.deque()
        self._head = 0
        self.memory = 0  # bytes of in-memory spans held

    def __len__(self) -> int:
        return len(self._kinds) - self._head

    def add(self, stream: int, start: int, end: int, data: Optional[bytes]) -> None:
        """Append a span, merged with the last one when both are file spans of ``stream`` that touch."""
        if data is None and len(self) and self._kinds[-1] == stream and self._ends[-1] == start:
            self._ends[-1] = end
            return
        self._starts.append(start)
        self._ends.append(end)
        self._kinds.append(stream if data is None else stream + 2)
        if data is not None:
            self._data.append(data)
            self.memory += len(data)

    def pop(self) -> Optional[Span]:
        """The oldest span, removed; None when empty."""
        if not len(self):
            return None
        index = self._head
        kind = self._kinds[index]
        data: Optional[bytes] = None
        if kind >= 2:
            data = self._data.popleft()
            self.memory -= len(data)
        span = Span(kind & 1, self._starts[index], self._ends[index], data)
        self._head += 1
        if self._head == len(self._kinds):
            self.clear()
        elif self._head >= _COMPACT and self._head * 2 >= len(self._kinds):
            for column in (self._starts, self._ends, self._kinds):
                del column[: self._head]
            self._head = 0
        return span

    def over(self) -> bool:
        """True while more is held than :data:`MAX_SPANS` spans or :data:`MAX_MEMORY` bytes allow."""
        return len(self) > MAX_SPANS or self.memory > MAX_MEMORY

    def clear(self) -> None:
        """Drop everything."""
        for column in (self._starts, self._ends, self._kinds):
            del column[:]
        self._data.clear()
        self._head = 0
        self.memory = 0
