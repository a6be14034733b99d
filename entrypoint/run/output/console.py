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

Every console line carries exactly one prefix, of the rank that wrote it, so a line never goes out in two
writes that another writer could come between:

- a queued write (a prefix and its lines) goes out in one ``writev``; to a pipe, in pieces of at most
  ``PIPE_BUF`` bytes that end at a newline where the write has one (a pipe write that small is atomic), so
  another process writing to the same pipe or terminal never lands inside one of our lines;
- the stdout and stderr consoles of a shim whose stdout and stderr are one file (``2>&1``, a terminal, the
  local backend's ``console.log``) share one queue and one writer (:func:`consoles`): one order of writes,
  and one notion of a line left open, so a partial line of one stream is ended before the other stream's
  next line instead of being joined to it.
"""

from __future__ import annotations

import collections
import os
import select
import stat
import threading
import time
from typing import BinaryIO, Callable, Deque, List, Optional, Sequence, Tuple, Union

__all__ = ["CONSOLE_BACKLOG", "CONSOLE_DRAIN", "CONSOLE_STUCK", "Console", "consoles"]

CONSOLE_BACKLOG = 16 << 20  # console bytes queued for a slow reader before producers wait (or drop)
CONSOLE_STUCK = 5.0  # a console that accepts no byte for this long while its backlog is full is stuck
CONSOLE_DRAIN = 60.0  # once every process ended, the console copy gets this long to catch up
_PIPE_BUF = 4096  # a write this small to a pipe that polls writable never blocks, and is atomic
_CHUNK = 1 << 20
_MAX_IOV = 256  # a queued write of more pieces than this is joined into one buffer first (IOV_MAX is 1024)

Bytes = Union[bytes, memoryview]


class _Destination:
    """One file the console writes to (a pipe, a terminal, a file): its queue and its writer thread. Shared by
    the :class:`Console` of stdout and of stderr when both are that file."""

    def __init__(self, stream: BinaryIO, name: str) -> None:
        self.stream = stream
        self.name = name
        self.fd = _usable_fd(stream)
        self.pipe = self.fd is not None and _is_pipe(self.fd)
        self.abandon = False
        self.lock = threading.Lock()
        self.ready = threading.Condition(self.lock)
        self.queue: Deque[Tuple[List[Bytes], int]] = collections.deque()
        self.queued = 0  # bytes queued, the write under way included
        self.current = 0  # bytes of the write under way
        self.last: object = None
        self.dangling = False  # the last write did not end with a newline
        self.broken = False
        self.closing = False
        self.users = 0  # the consoles writing here that are not closed yet
        self.consoles = 0  # the consoles made for this file
        self.progress = time.monotonic()  # the last time the stream accepted bytes
        self.patience = CONSOLE_STUCK
        self.deadline: Optional[float] = None
        self.writer: Optional[threading.Thread] = None

    def same_file(self, stream: BinaryIO) -> bool:
        """Whether ``stream`` writes to this very file (the same object, or a descriptor of the same file)."""
        if stream is self.stream:
            return True
        fd = _usable_fd(stream)
        if fd is None or self.fd is None:
            return False
        try:
            mine, theirs = os.fstat(self.fd), os.fstat(fd)
        except OSError:
            return False
        if stat.S_ISCHR(mine.st_mode) and stat.S_ISCHR(theirs.st_mode) and mine.st_rdev == theirs.st_rdev:
            return True  # one terminal, maybe through two paths (/dev/tty, /dev/pts/N)
        return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)

    def run(self) -> None:
        """The writer thread: the queue to the stream, one write at a time, in order."""
        while True:
            with self.lock:
                while not self.queue and not self.closing:
                    self.ready.wait()
                if not self.queue:
                    return
                pieces, size = self.queue.popleft()
                self.current = size
            if not self._write(pieces):
                with self.lock:
                    self.broken = True
                    self.queue.clear()
                    self.queued = 0
                    self.ready.notify_all()
                return
            with self.lock:
                self.queued -= size
                self.current = 0
                self.progress = time.monotonic()
                self.ready.notify_all()

    def _write(self, pieces: List[Bytes]) -> bool:
        """One queued write (a prefix and its lines) as one write, so nobody else's bytes come between."""
        try:
            if self.fd is None:
                self.stream.write(b"".join(pieces))
                self.stream.flush()
                return True
            poller = select.poll()
            poller.register(self.fd, select.POLLOUT)
            if self.pipe:
                return self._write_pipe(self.fd, poller, b"".join(pieces))
            if len(pieces) > _MAX_IOV:
                pieces = [b"".join(pieces)]
            views = [memoryview(piece) for piece in pieces]
            while views:
                if not self._writable(poller):
                    return False
                written = os.writev(self.fd, views)
                self.progress = time.monotonic()
                while views and written >= len(views[0]):  # a short write (rare): go on with the rest
                    written -= len(views[0])
                    views.pop(0)
                if views and written:
                    views[0] = views[0][written:]
            return True
        except (OSError, ValueError):  # console closed: the logs still get everything
            return False

    def _write_pipe(self, fd: int, poller: select.poll, data: bytes) -> bool:
        """``data`` to a pipe in atomic pieces of at most ``PIPE_BUF`` bytes, each ending at a newline where one
        falls within it (only a longer line is cut)."""
        view = memoryview(data)
        start, end = 0, len(data)
        while start < end:
            stop = min(end, start + _PIPE_BUF)
            if stop < end:
                newline = data.rfind(b"\n", start, stop)
                if newline >= 0:
                    stop = newline + 1
            if not self._writable(poller):
                return False
            start += os.write(fd, view[start:stop])
            self.progress = time.monotonic()
        return True

    def _writable(self, poller: select.poll) -> bool:
        """Wait until the stream takes a write; False once :meth:`Console.close` gave up on it."""
        while not poller.poll(200):
            if self.abandon:
                return False
        return True


class Console:
    """A console stream shared by several producers that never makes a producer wait.

    Producers hand whole writes to :meth:`emit`, which only queues them; one writer thread moves them to the
    stream. Paced producers wait for room (:meth:`wait_room`) and are never dropped; for the others, when more
    than :data:`CONSOLE_BACKLOG` bytes wait, further writes are dropped from the console (the log files still
    get every byte) and one warning says so. Writes to a stream with a file descriptor go through ``poll``, to
    a pipe in pieces of at most ``PIPE_BUF`` bytes, so the writer itself can give up on a stuck reader at
    :meth:`close`. Lines of different producers never run together, even when a write between them was dropped.

    ``share``: the other console of the shim (stdout's, for stderr's): when ``stream`` is the same file, both
    write through one queue and one writer (see the module docstring).
    """

    def __init__(self, stream: BinaryIO, name: str = "console", share: Optional[Console] = None) -> None:
        self._dest: _Destination = (
            share._dest if share is not None and share._dest.same_file(stream) else _Destination(stream, name)
        )
        self._dest.users += 1
        self._dest.consoles += 1
        self._dropped = 0
        self._closed = False

    @property
    def shared(self) -> bool:
        """Whether another console writes through the same queue (stdout and stderr are one file)."""
        return self._dest.consoles > 1

    @property
    def _queued(self) -> int:
        return self._dest.queued

    def emit(self, owner: object, parts: Sequence[Bytes], resume: bytes = b"", keep: bool = False) -> None:
        """Queue ``parts`` as one write; ``resume`` (a line prefix) goes first if another producer wrote last.

        The parts are queued as they are, not copied: they must not change after the call (``bytes``, or views
        of ``bytes``). ``keep``: a paced producer's write (it waited for :meth:`wait_room`), never dropped.
        """
        dest = self._dest
        with dest.lock:
            if dest.broken:
                return
            pieces: List[Bytes] = [part for part in parts if part]
            if not pieces:
                return
            if dest.last is not owner:
                if resume:
                    pieces.insert(0, resume)
                if dest.dangling:
                    pieces.insert(0, b"\n")
            size = sum(len(piece) for piece in pieces)
            if not keep and dest.queued + size > CONSOLE_BACKLOG and dest.queued:
                self._dropped += 1
                dest.last = None  # whoever writes next starts on a fresh line
                return  # the stream does not keep up: this write is lost for the console only
            dest.last = owner
            dest.dangling = bytes(pieces[-1][-1:]) != b"\n"
            dest.queue.append((pieces, size))
            dest.queued += size
            if dest.writer is None:
                dest.writer = threading.Thread(target=dest.run, name=f"{dest.name}-writer", daemon=True)
                dest.writer.start()
            dest.ready.notify()

    def message(self, text: str, keep: bool = False) -> None:
        """One line from the shim itself (always starts on a fresh line)."""
        self.emit(self, [text.encode("utf-8", "replace") + b"\n"], keep=keep)

    def wait_room(self) -> bool:
        """For a paced producer: wait while the backlog is full. True once there is room (or the stream is
        broken: writes are ignored then); False when the stream accepted nothing for the patience (stuck):
        :data:`CONSOLE_STUCK` s, or :meth:`close`'s patience once the run is ending."""
        dest = self._dest
        with dest.lock:
            started = time.monotonic()
            while dest.queued >= CONSOLE_BACKLOG and not dest.broken and not dest.abandon:
                if time.monotonic() - max(started, dest.progress) > dest.patience:
                    return False
                dest.ready.wait(0.05)
            return not dest.abandon

    @property
    def has_room(self) -> bool:
        """True when a write would not wait (a paced producer that skipped while stuck resumes then)."""
        return self._dest.queued < CONSOLE_BACKLOG or self._dest.broken

    def ending(self, patience: float, deadline: float) -> None:
        """Every process has ended: from now on a console that accepts nothing for ``patience`` s is stuck, and
        what it still lacks at ``deadline`` (monotonic) is not shown (paced producers skip, :meth:`close`
        gives up)."""
        dest = self._dest
        with dest.lock:
            dest.patience = min(dest.patience, patience)
            dest.deadline = deadline if dest.deadline is None else min(dest.deadline, deadline)
            dest.ready.notify_all()

    @property
    def patience(self) -> float:
        """Seconds without progress after which a full backlog means a stuck console."""
        return self._dest.patience

    @property
    def cut_off(self) -> bool:
        """True once the deadline given to :meth:`ending` has passed."""
        return self._dest.deadline is not None and time.monotonic() > self._dest.deadline

    @property
    def dropped(self) -> int:
        """Writes of producers that cannot wait which never reached the console because it did not keep up."""
        return self._dropped

    def close(self, patience: float, cut_note: Optional[Callable[[int], str]] = None) -> int:
        """Deliver what is queued while the stream makes progress; give up after ``patience`` s without any.
        Returns the bytes given up that way (0: everything went out, or the stream broke).

        Past the deadline given to :meth:`ending`, writes not yet started are given up and replaced by one line,
        ``cut_note(bytes given up)``, which gets ``patience`` s to go out. A console that shares its stream
        with one still open only delivers: the last one to close ends the writer.
        """
        dest = self._dest
        with dest.lock:
            if not self._closed:
                self._closed = True
                dest.users -= 1
            last = dest.users <= 0
            if last:
                dest.closing = True
                dest.ready.notify_all()
            writer = dest.writer
            started = time.monotonic()
            while writer is not None and dest.queued and not dest.broken:
                dest.ready.wait(0.05)
                now = time.monotonic()
                if dest.deadline is not None and now > dest.deadline and cut_note and dest.queued > dest.current:
                    lost = dest.queued - dest.current
                    dest.queue.clear()
                    note = cut_note(lost).encode("utf-8", "replace") + b"\n"
                    if dest.dangling:
                        note = b"\n" + note
                    dest.queue.append(([note], len(note)))
                    dest.queued = dest.current + len(note)
                    dest.deadline = None
                    cut_note = None
                    started = now
                elif now - max(started, dest.progress) > patience:
                    break
            left = 0 if dest.broken else dest.queued
            if not last:
                return left
            dest.abandon = True
            dest.ready.notify_all()
        if writer is not None:
            writer.join(patience + 0.5)
        return left


def consoles(out: BinaryIO, err: BinaryIO) -> Tuple[Console, Console]:
    """The stdout and stderr consoles of a run: one queue and one writer when both are the same file."""
    stdout = Console(out, "stdout")
    return stdout, Console(err, "stderr", share=stdout)


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
