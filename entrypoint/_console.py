"""The console: one stream shared by every producer of a run, which never makes a producer wait.

A rank's bytes reach its log file first (:mod:`._splice`, :mod:`._pump`); the console copy is queued here and
written by one thread. A slow or stuck reader can cost console lines (dropped once :data:`CONSOLE_BACKLOG` bytes
wait; the run says so once at the end), never a log-file byte and never time: writes to a pipe go out in pieces
of at most ``PIPE_BUF`` bytes after ``poll`` says they fit, so :meth:`Console.close` can give up on a stuck
reader.
"""

from __future__ import annotations

import collections
import os
import select
import stat
import threading
import time
from typing import BinaryIO, Deque, List, Optional, Sequence, Tuple, Union

__all__ = ["CONSOLE_BACKLOG", "Console"]

CONSOLE_BACKLOG = 16 << 20  # console bytes allowed to wait for a slow reader before writes are dropped
_PIPE_BUF = 4096  # a write this small to a pipe that polls writable never blocks
_CHUNK = 1 << 20

Bytes = Union[bytes, memoryview]


class Console:
    """A console stream shared by several producers that never makes a producer wait.

    Producers hand whole writes to :meth:`emit`, which only queues them; one writer thread moves them to the
    stream. When the stream is slow or stuck and more than :data:`CONSOLE_BACKLOG` bytes wait, further writes
    are dropped from the console (the log files still get every byte) and one warning says so. Writes to a
    stream with a file descriptor go through ``poll`` in pieces of at most ``PIPE_BUF`` bytes, so the writer
    itself can give up on a stuck reader at :meth:`close`. Lines of different producers never run together.
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
        self._queued = 0
        self._last: object = None
        self._dangling = False  # the last write did not end with a newline
        self._broken = False
        self._closing = False
        self._dropped = 0
        self._writer: Optional[threading.Thread] = None

    def emit(self, owner: object, parts: Sequence[Bytes], resume: bytes = b"") -> None:
        """Queue ``parts`` as one write; ``resume`` (a line prefix) goes first if another producer wrote last.

        The parts are queued as they are, not copied: they must not change after the call (``bytes``, or views
        of ``bytes``).
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
            if self._queued + size > CONSOLE_BACKLOG and self._queued:
                self._dropped += 1
                return  # the stream does not keep up: this write is lost for the console only
            self._last = owner
            self._dangling = bytes(pieces[-1][-1:]) != b"\n"
            self._queue.append((pieces, size))
            self._queued += size
            if self._writer is None:
                self._writer = threading.Thread(target=self._run, name=f"{self._name}-writer", daemon=True)
                self._writer.start()
            self._ready.notify()

    def message(self, text: str) -> None:
        """One line from the shim itself (always starts on a fresh line)."""
        self.emit(self, [text.encode("utf-8", "replace") + b"\n"])

    @property
    def dropped(self) -> int:
        """Writes that never reached the console because it did not keep up."""
        return self._dropped

    @property
    def saturated(self) -> bool:
        """True while the backlog is full: a producer may skip output it has not prepared yet (and call
        :meth:`drop`) instead of preparing writes that would be dropped."""
        return self._queued >= CONSOLE_BACKLOG

    def drop(self) -> None:
        """Count one write a producer skipped because the console was :attr:`saturated`."""
        with self._lock:
            self._dropped += 1

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closing:
                    self._ready.wait()
                if not self._queue:
                    return
                pieces, size = self._queue.popleft()
            if not self._write(pieces):
                with self._lock:
                    self._broken = True
                    self._queue.clear()
                    self._queued = 0
                    self._ready.notify_all()
                return
            with self._lock:
                self._queued -= size
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
            return True
        except (OSError, ValueError):  # console closed: the logs still get everything
            return False

    def close(self, patience: float) -> None:
        """Deliver what is queued while the stream makes progress; give up after ``patience`` s without any."""
        with self._lock:
            self._closing = True
            self._ready.notify_all()
            writer = self._writer
            last = self._queued
            deadline = time.monotonic() + patience
            while writer is not None and self._queue and not self._broken:
                self._ready.wait(0.05)
                if self._queued != last:
                    last = self._queued
                    deadline = time.monotonic() + patience
                elif time.monotonic() > deadline:
                    break
            self._abandon = True
            self._ready.notify_all()
        if writer is not None:
            writer.join(patience + 0.5)


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
