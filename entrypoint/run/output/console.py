"""The console: one stream shared by every producer of a run, which never makes a producer wait.

A rank's bytes reach its log file first (:mod:`.splice`, :mod:`.pump`); the console copy is queued here and
written by one thread. Two kinds of producer share it:

- *paced* producers (the console copy of a rank's log file, :meth:`.splice.SpliceSink.forward`) read their
  bytes back from a file, so they can wait: before each chunk they call :meth:`Console.wait_room`, which
  returns once the backlog has room, or False once the console has accepted nothing for
  :data:`CONSOLE_STUCK` s (stuck). Their writes (``keep=True``) are never dropped: while the console keeps
  accepting bytes it gets every line, late if need be, and the lag costs no memory (it stays in the file).
- the others (a launcher's pipes, the files msrun and torchrun's workers write) cannot wait: once more than
  :data:`CONSOLE_BACKLOG` bytes are queued their writes are dropped, and the run says so once at the end.

Neither ever costs a log-file byte or holds a rank up: writes to a pipe go out in pieces of at most
``PIPE_BUF`` bytes after ``poll`` says they fit, so :meth:`Console.close` can give up on a stuck reader.
"""

from __future__ import annotations

import collections
import os
import select
import stat
import threading
import time
from typing import BinaryIO, Callable, Deque, List, Optional, Sequence, Tuple, Union

__all__ = ["CONSOLE_BACKLOG", "CONSOLE_DRAIN", "CONSOLE_STUCK", "Console"]

CONSOLE_BACKLOG = 16 << 20  # console bytes queued for a slow reader before producers wait (or drop)
CONSOLE_STUCK = 5.0  # a console that accepts no byte for this long while its backlog is full is stuck
CONSOLE_DRAIN = 60.0  # once every process ended, the console copy gets this long to catch up
_PIPE_BUF = 4096  # a write this small to a pipe that polls writable never blocks
_CHUNK = 1 << 20

Bytes = Union[bytes, memoryview]


class Console:
    """A console stream shared by several producers that never makes a producer wait.

    Producers hand whole writes to :meth:`emit`, which only queues them; one writer thread moves them to the
    stream. Paced producers wait for room (:meth:`wait_room`) and are never dropped; for the others, when more
    than :data:`CONSOLE_BACKLOG` bytes wait, further writes are dropped from the console (the log files still
    get every byte) and one warning says so. Writes to a stream with a file descriptor go through ``poll`` in
    pieces of at most ``PIPE_BUF`` bytes, so the writer itself can give up on a stuck reader at :meth:`close`.
    Lines of different producers never run together, even when a write between them was dropped.
    """

    def __init__(self, stream: BinaryIO, name: str = "console") -> None:
        self._stream = stream
        self._name = name
        self._fd = _usable_fd(stream)
        self._piece = _PIPE_BUF if self._fd is not None and _is_pipe(self._fd) else _CHUNK
        self._abandon = False
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._queue: Deque[Tuple[List[Bytes], int]] = collections.deque()
        self._queued = 0  # bytes queued, the write under way included
        self._current = 0  # bytes of the write under way
        self._last: object = None
        self._dangling = False  # the last write did not end with a newline
        self._broken = False
        self._closing = False
        self._dropped = 0
        self._progress = time.monotonic()  # the last time the stream accepted bytes
        self._patience = CONSOLE_STUCK
        self._deadline: Optional[float] = None
        self._writer: Optional[threading.Thread] = None

    def emit(self, owner: object, parts: Sequence[Bytes], resume: bytes = b"", keep: bool = False) -> None:
        """Queue ``parts`` as one write; ``resume`` (a line prefix) goes first if another producer wrote last.

        The parts are queued as they are, not copied: they must not change after the call (``bytes``, or views
        of ``bytes``). ``keep``: a paced producer's write (it waited for :meth:`wait_room`), never dropped.
        """
        with self._lock:
            if self._broken:
                return
            pieces: List[Bytes] = [part for part in parts if part]
            if not pieces:
                return
            if self._last is not owner:
                if resume:
                    pieces.insert(0, resume)
                if self._dangling:
                    pieces.insert(0, b"\n")
            size = sum(len(piece) for piece in pieces)
            if not keep and self._queued + size > CONSOLE_BACKLOG and self._queued:
                self._dropped += 1
                self._last = None  # whoever writes next starts on a fresh line
                return  # the stream does not keep up: this write is lost for the console only
            self._last = owner
            self._dangling = bytes(pieces[-1][-1:]) != b"\n"
            self._queue.append((pieces, size))
            self._queued += size
            if self._writer is None:
                self._writer = threading.Thread(target=self._run, name=f"{self._name}-writer", daemon=True)
                self._writer.start()
            self._ready.notify()

    def message(self, text: str, keep: bool = False) -> None:
        """One line from the shim itself (always starts on a fresh line)."""
        self.emit(self, [text.encode("utf-8", "replace") + b"\n"], keep=keep)

    def wait_room(self) -> bool:
        """For a paced producer: wait while the backlog is full. True once there is room (or the stream is
        broken: writes are ignored then); False when the stream accepted nothing for the patience (stuck):
        :data:`CONSOLE_STUCK` s, or :meth:`close`'s patience once the run is ending."""
        with self._lock:
            started = time.monotonic()
            while self._queued >= CONSOLE_BACKLOG and not self._broken and not self._abandon:
                if time.monotonic() - max(started, self._progress) > self._patience:
                    return False
                self._ready.wait(0.05)
            return not self._abandon

    @property
    def has_room(self) -> bool:
        """True when a write would not wait (a paced producer that skipped while stuck resumes then)."""
        return self._queued < CONSOLE_BACKLOG or self._broken

    def ending(self, patience: float, deadline: float) -> None:
        """Every process has ended: from now on a console that accepts nothing for ``patience`` s is stuck, and
        what it still lacks at ``deadline`` (monotonic) is not shown (paced producers skip, :meth:`close`
        gives up)."""
        with self._lock:
            self._patience = min(self._patience, patience)
            self._deadline = deadline
            self._ready.notify_all()

    @property
    def patience(self) -> float:
        """Seconds without progress after which a full backlog means a stuck console."""
        return self._patience

    @property
    def cut_off(self) -> bool:
        """True once the deadline given to :meth:`ending` has passed."""
        return self._deadline is not None and time.monotonic() > self._deadline

    @property
    def dropped(self) -> int:
        """Writes of producers that cannot wait which never reached the console because it did not keep up."""
        return self._dropped

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closing:
                    self._ready.wait()
                if not self._queue:
                    return
                pieces, size = self._queue.popleft()
                self._current = size
            if not self._write(pieces):
                with self._lock:
                    self._broken = True
                    self._queue.clear()
                    self._queued = 0
                    self._ready.notify_all()
                return
            with self._lock:
                self._queued -= size
                self._current = 0
                self._progress = time.monotonic()
                self._ready.notify_all()

    def _write(self, pieces: List[Bytes]) -> bool:
        try:
            if self._fd is None:
                for piece in pieces:
                    self._stream.write(piece)
                self._stream.flush()
                return True
            poller = select.poll()
            poller.register(self._fd, select.POLLOUT)
            for piece in pieces:
                view = memoryview(piece)
                while view:
                    while not poller.poll(200):
                        if self._abandon:
                            return False
                    view = view[os.write(self._fd, view[: self._piece]) :]
                    self._progress = time.monotonic()
            return True
        except (OSError, ValueError):  # console closed: the logs still get everything
            return False

    def close(self, patience: float, cut_note: Optional[Callable[[int], str]] = None) -> int:
        """Deliver what is queued while the stream makes progress; give up after ``patience`` s without any.
        Returns the bytes given up that way (0: everything went out, or the stream broke).

        Past the deadline given to :meth:`ending`, writes not yet started are given up and replaced by one line,
        ``cut_note(bytes given up)``, which gets ``patience`` s to go out.
        """
        with self._lock:
            self._closing = True
            self._ready.notify_all()
            writer = self._writer
            started = time.monotonic()
            while writer is not None and self._queued and not self._broken:
                self._ready.wait(0.05)
                now = time.monotonic()
                if self._deadline is not None and now > self._deadline and cut_note and self._queued > self._current:
                    lost = self._queued - self._current
                    self._queue.clear()
                    note = cut_note(lost).encode("utf-8", "replace") + b"\n"
                    if self._dangling:
                        note = b"\n" + note
                    self._queue.append(([note], len(note)))
                    self._queued = self._current + len(note)
                    self._deadline = None
                    cut_note = None
                    started = now
                elif now - max(started, self._progress) > patience:
                    break
            self._abandon = True
            self._ready.notify_all()
            left = 0 if self._broken else self._queued
        if writer is not None:
            writer.join(patience + 0.5)
        return left


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return True
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _usable_fd(stream: BinaryIO) -> Optional[int]:
    """The stream's descriptor if writes can go straight to it (its own buffer flushed first), else None."""
    try:
        fd = stream.fileno()
        stream.flush()
    except (OSError, ValueError, AttributeError):
        return None
    return fd
