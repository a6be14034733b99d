"""The pump of a process's two pipes into its log file (:func:`splice_pump`), which keeps each line of the file
one stream's.

Both pipes are spliced into one file as their bytes come, so a partial stdout line followed by a whole stderr line
ran together in the file (``partial-out a whole err line``, then ``rest of out``): in the rank's log and in the
failure report's tail read from it. :class:`LineHold` notes which stream's line is open at the file's end; while
one is, the other pipe is left unread (its bytes wait in the pipe, which holds :data:`~.pump.PIPE_SIZE`) until the
line ends, for at most :data:`~.pump.HOLD_SECONDS` from the line's first byte, the console's own hold. A line left
open longer (a progress bar's ``\\r``, a prompt) is then joined by the other stream's bytes as before, and nothing
is held once the run ends. The log still gets every byte, each stream's in its own order.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional, Sequence, Set

from .pump import HOLD_SECONDS, PipeWait
from .splice import SpliceSink

__all__ = ["LineHold", "splice_pump"]


class LineHold:
    """Which stream's line is open at the end of the log file, since when, and whether the other stream waits."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._open: Optional[int] = None
        self._since = 0.0
        self._waited = False  # the other stream has waited its HOLD_SECONDS for this line

    def note(self, open_stream: Optional[int]) -> None:
        """The stream whose line is open at the file's end now (None: the file ends with a newline)."""
        if open_stream != self._open:
            self._open, self._since, self._waited = open_stream, self._clock(), False

    def held(self, stream: int) -> bool:
        """Whether ``stream`` must wait for the other stream's open line to end."""
        if self._open is None or self._open == stream or self._waited:
            return False
        if self._clock() - self._since >= HOLD_SECONDS:
            self._waited = True
            return False
        return True

    def wait_ms(self, longest: int) -> int:
        """How long the pump may sleep without missing the end of a hold (at most ``longest`` ms)."""
        if self._open is None or self._waited:
            return longest
        return max(0, min(longest, int((self._since + HOLD_SECONDS - self._clock()) * 1000) + 1))


def splice_pump(fds: Sequence[int], sink: SpliceSink, stop: threading.Event) -> None:
    """Thread body: move a process's pipes ``fds`` (stream 0 = stdout, 1 = stderr) into ``sink`` until each has
    ended, or, once ``stop`` is set, until none has more to give (at most :data:`~.pump.DRAIN_LIMIT` s). One thread
    serves both pipes: each splice holds the sink's lock, so two threads would only take turns."""
    wait = PipeWait(fds, stop)
    streams = dict(enumerate(fds))  # the pipes not ended yet: stream -> fd
    hold = LineHold()
    paused: Set[int] = set()
    try:
        while streams:
            draining = stop.is_set()  # the run ends: nothing waits any more
            for stream, fd in streams.items():
                held = hold.held(stream) and not draining
                if held != (fd in paused):
                    (wait.pause if held else wait.resume)(fd)
                    (paused.add if held else paused.discard)(fd)
            ready = wait.ready(hold.wait_ms(200))
            if ready is None:
                break
            for stream, fd in list(streams.items()):
                if fd not in ready or (hold.held(stream) and not draining):
                    continue
                if sink.splice(fd, stream):
                    hold.note(sink.open_line)
                    continue
                del streams[stream]
                wait.forget(fd)
                sink.end(stream)
                hold.note(None if sink.open_line == stream else sink.open_line)  # nobody waits for an ended line
    finally:
        for stream in streams:
            sink.end(stream)
