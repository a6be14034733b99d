"""Followed files whose console copy is read back at the console's pace (lag, not loss).

torchrun's and msrun's workers write their own files; :class:`.pump.FileFollower` follows them. The console
copy is not made by the follower (it must never wait, and under torchrun it also writes ``rank-N.log``): the
follower hands each chunk to a :class:`.splice.SpliceSink`, which records it as a span of a file, and that
sink's reader (:meth:`.splice.SpliceSink.forward`, the same one as under the fan-out) reads the spans back
when the console has room, skips only while the console is stuck (saying so in one line), and drains within
the bound after the end.

- :class:`CopyFeed` (torchrun): the chunk is appended to ``rank-N.log`` at full speed; the span is of that file.
- :class:`MirrorFeed` (msrun): ``worker_N.log`` is already the rank's log; the span is of that file itself, so
  nothing is written and nothing is held in memory.
"""

from __future__ import annotations

from typing import Union

from .splice import SpliceSink

__all__ = ["CopyFeed", "MirrorFeed"]


class CopyFeed:
    """One worker file (stream 0 stdout, 1 stderr) copied into its rank's log; several files (attempts) may feed
    one log, in order. The rank log's console copy ends with :func:`end_copies`, not here."""

    holding = False  # no partial line is held here: the reader holds them

    def __init__(self, sink: SpliceSink, stream: int) -> None:
        self._sink = sink
        self._stream = stream

    def opened(self, fd: int) -> None:
        """Nothing to do: the copy is read back from the rank log, not from the worker's file."""

    def feed(self, buf: Union[bytes, bytearray], size: int) -> None:
        """Append ``buf[:size]`` to the rank log (a span for the reader)."""
        self._sink.copy(self._stream, memoryview(buf)[:size])

    def flush_partial(self) -> None:
        """Nothing is held here."""

    def finish(self) -> None:
        """A later attempt's file may still follow: the follower ends the rank logs itself."""


class MirrorFeed:
    """A rank's own log written by its worker (msrun ``worker_N.log``, stdout and stderr in one file): the
    console copy is read back from that very file."""

    holding = False

    def __init__(self, sink: SpliceSink) -> None:
        self._sink = sink

    def opened(self, fd: int) -> None:
        """The follower opened the file (or a new one took its place)."""
        self._sink.follow(fd)

    def feed(self, buf: Union[bytes, bytearray], size: int) -> None:
        """The file grew by ``buf[:size]``."""
        self._sink.grew(0, memoryview(buf)[:size])

    def flush_partial(self) -> None:
        """Nothing is held here."""

    def finish(self) -> None:
        """The file is read to its end: the reader drains and stops."""
        end_copies(self._sink)


def end_copies(sink: SpliceSink) -> None:
    """No more spans will come: the sink's console reader finishes what it has and stops."""
    sink.end(0)
    sink.end(1)
