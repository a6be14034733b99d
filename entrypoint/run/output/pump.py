"""Output plumbing of the supervisor: pipes and launcher-written files to the console and the log files.

The ranks' own pipes (log source ``pipe``) are spliced into their log files by :mod:`.splice`, which uses
:class:`Sink` and :class:`LineStream` from here; :func:`pump` serves the launchers' pipes (torchrun, msrun).

Everything works on bytes: invalid UTF-8 and megabyte lines pass through unchanged. Pipes are read with
``os.readv`` into one preallocated 1 MiB buffer per stream (the pipe is enlarged to match; a fresh 1 MiB
``os.read`` allocation per chunk halves throughput), log files get the raw chunk at once, and the console
gets whole lines with a per-line prefix made by one ``bytes.replace`` per chunk, so throughput stays close
to writing a file directly. A partial last line is held back from the console until
its newline arrives, the stream has been quiet for :data:`HOLD_SECONDS`, or the stream ends; it is never
dropped. :class:`Console` keeps lines of different streams from running into each other.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import select
import threading
import time
from typing import Callable, List, Mapping, Optional, Protocol, Sequence, Tuple, Union

from .console import Console
from .sink import Bytes, Sink, Warn

__all__ = [
    "HOLD_SECONDS",
    "Feed",
    "FileFollower",
    "LineStream",
    "PipeWait",
    "Sink",
    "follow",
    "pump",
    "tune_malloc",
]

CHUNK = 1 << 20
PIPE_SIZE = 1 << 20
HOLD_SECONDS = 0.5
MAX_HOLD = 4 << 20  # a partial line longer than this goes out in pieces
DRAIN_LIMIT = 5.0  # after the job ended, a pipe still written by an unknown process is abandoned
_F_SETPIPE_SZ = 1031
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


class Feed(Protocol):
    """Where :class:`FileFollower` hands a followed file's bytes (:class:`LineStream`, or a copy into a rank log
    whose console copy is read back from it)."""

    @property
    def holding(self) -> bool: ...

    def opened(self, fd: int) -> None: ...

    def feed(self, buf: Union[bytes, bytearray], size: int) -> None: ...

    def flush_partial(self) -> None: ...

    def finish(self) -> None: ...


class LineStream:
    """One stream to the console with ``prefix`` at the start of every line; raw bytes to ``sink``."""

    def __init__(
        self,
        console: Console,
        prefix: bytes,
        sink: Optional[Sink],
        on_lines: Optional[Callable[[bytes], None]] = None,
        quiet: Optional[threading.Event] = None,
        gap_note: Optional[Callable[[int, str], str]] = None,
    ) -> None:
        """``gap_note``: this stream is paced (its producer waits for the console's room, its writes are never
        dropped), and ``gap_note(bytes, reason)`` is the line that says where bytes were skipped."""
        self._console = console
        self._quiet = quiet  # once set, this stream goes to its log file only (a launcher's teardown chatter)
        self._prefix = prefix
        self._nl_prefix = b"\n" + prefix
        self._sink = sink
        self._on_lines = on_lines
        self._gap_note = gap_note
        self._keep = gap_note is not None
        self._held: List[bytes] = []
        self._held_size = 0
        self._mid_line = False  # part of the current line is already on the console
        self._skipping = False  # bytes were lost: drop the rest of the current line
        self._gap = 0  # bytes not shown since the last line that was
        self._gap_reason = ""

    def relabel(self, prefix: bytes, gap_note: Optional[Callable[[int, str], str]]) -> None:
        """A new line prefix (and gap note), before the stream's first byte: the rank its script sees."""
        self._prefix = prefix
        self._nl_prefix = b"\n" + prefix
        self._gap_note = gap_note if self._gap_note is not None else None

    @property
    def holding(self) -> bool:
        """True while a partial line waits for its end."""
        return bool(self._held)

    def opened(self, fd: int) -> None:
        """A followed file was (re)opened: a line stream reads what it is fed, nothing to do."""

    def skip(self, count: int = 0, reason: str = "", at_line_start: bool = False) -> None:
        """``count`` bytes of this stream will not be fed (the console is stuck, or fell behind): the line they
        belong to is dropped, and the console resumes at the next whole line (at once when ``at_line_start``:
        the skipped bytes ended with a newline). Before the next line shown, one line says what was skipped."""
        if self._mid_line and not self._muted():
            self._console.emit(self, [b"\n"], keep=True)  # end the part of the line already shown
        self._gap += count + self._held_size
        self._gap_reason = reason or self._gap_reason
        self._held = []
        self._held_size = 0
        self._mid_line = False
        self._skipping = not at_line_start

    def _muted(self) -> bool:
        return self._quiet is not None and self._quiet.is_set()

    def _say_gap(self) -> None:
        """The note about skipped bytes, once, before anything else of this stream reaches the console."""
        if self._gap and self._gap_note is not None and not self._muted():
            self._console.message(self._gap_note(self._gap, self._gap_reason), keep=True)
        self._gap = 0

    def feed(self, buf: Union[bytes, bytearray], size: int) -> None:
        """Take the next chunk of output, ``buf[:size]`` (only valid during the call; a ``bytes`` chunk passed
        whole is used as it is, without a copy)."""
        view = memoryview(buf)[:size]
        if self._sink is not None:
            self._sink.write(view)
        if self._skipping:
            first = buf.find(b"\n", 0, size)
            if first < 0:
                self._gap += size
                return
            self._gap += first + 1
            self._skipping = False
            view = view[first + 1 :]
            size = len(view)
            if not size:
                return
        if self._gap:
            self._say_gap()
        data = buf if type(buf) is bytes and size == len(buf) else view.tobytes()
        nl = data.rfind(b"\n")
        if nl < 0:
            self._held.append(data)
            self._held_size += size
            if self._held_size > MAX_HOLD:
                self.flush_partial()
            return
        rest = size - nl - 1
        if self._on_lines is not None:
            self._on_lines(b"".join([*self._held, data[: nl + 1]]))
        if not self._muted():
            # One pass over the whole chunk; the partial line after the last newline comes out unchanged at
            # the end of ``out`` and is cut off (it is held instead), with the prefix meant for the next line.
            out = data.replace(b"\n", self._nl_prefix)
            parts: List[Bytes] = [] if self._mid_line else [self._prefix]
            parts.extend(self._held)
            parts.append(memoryview(out)[: len(out) - rest - len(self._prefix)])
            self._console.emit(self, parts, self._prefix if self._mid_line else b"", self._keep)
        self._held = [data[nl + 1 :]] if rest else []
        self._held_size = rest
        self._mid_line = False

    def flush_partial(self) -> None:
        """Show the held partial line now; the rest of the line follows without a new prefix."""
        if not self._held:
            return
        if self._muted():
            self._held = []
            self._held_size = 0
            return
        parts: List[Bytes] = [] if self._mid_line else [self._prefix]
        parts.extend(self._held)
        self._console.emit(self, parts, self._prefix if self._mid_line else b"", self._keep)
        self._held = []
        self._held_size = 0
        self._mid_line = True

    def finish(self) -> None:
        """End of stream: nothing may stay held, and a gap at the end is said."""
        self.flush_partial()
        self._say_gap()


def tune_malloc() -> None:
    """Keep megabyte buffers on the heap (glibc only; elsewhere a no-op).

    Each chunk allocates two buffers of about 1 MiB. By default glibc serves them with mmap/munmap and trims
    the heap after each free, so every chunk pays for fresh zeroed pages: measured, that halves pump
    throughput. Raising both thresholds lets the allocations reuse the same heap memory (a few tens of MiB
    stay reserved for the life of the process).
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, 128 << 20)


class PipeWait:
    """Waits until one of a process's pipes has something to read; once ``stop`` is set, only while one still has
    data, for at most :data:`DRAIN_LIMIT` s (a pipe still written by an unknown process is then abandoned)."""

    def __init__(self, fds: Sequence[int], stop: threading.Event) -> None:
        self._poller = select.poll()
        for fd in fds:
            # Not a pipe, or above /proc/sys/fs/pipe-max-size: the default size works too.
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_SIZE)
            self._poller.register(fd, select.POLLIN)
        self._stop = stop
        self._deadline: Optional[float] = None

    def ready(self, timeout_ms: int) -> Optional[List[int]]:
        """The pipes with data (or at their end) to read; empty: nothing within ``timeout_ms``, wait again; None:
        stop reading."""
        if self._stop.is_set():
            if self._deadline is None:
                self._deadline = time.monotonic() + DRAIN_LIMIT
            elif time.monotonic() > self._deadline:
                return None
            timeout_ms = 0
        ready = [fd for fd, _events in self._poller.poll(timeout_ms)]
        return None if not ready and self._stop.is_set() else ready

    def forget(self, fd: int) -> None:
        """Pipe ``fd`` has ended: no more waiting for it."""
        self._poller.unregister(fd)


def pump(fd: int, router: LineStream, stop: threading.Event, warn: Warn) -> None:
    """Read ``fd`` until EOF (or, once ``stop`` is set, until it has nothing more to give) into ``router``."""
    wait = PipeWait((fd,), stop)
    hold_ms = int(HOLD_SECONDS * 1000)
    buffer = bytearray(CHUNK)
    broken = False
    while True:
        ready = wait.ready(hold_ms if router.holding else 200)
        if ready is None:
            break
        if not ready:
            if router.holding and not broken:
                router.flush_partial()
            continue
        try:
            size = os.readv(fd, [buffer])
        except OSError:
            break
        if not size:
            break
        if broken:
            continue  # keep the pipe flowing so the writer never blocks
        try:
            router.feed(buffer, size)
        except Exception as error:  # a bug here must not stall the job: report it and keep draining
            broken = True
            warn(f"output of this stream is no longer forwarded ({type(error).__name__}: {error})")
    if not broken:
        router.finish()


class _Followed:
    """One followed file: where it is read up to, and ``baseline``, the (inode, size, mtime) of a file left over
    from an earlier run (skipped until it changes)."""

    __slots__ = ("baseline", "fd", "inode", "last_data", "path", "position", "stream")

    def __init__(self, path: str, stream: Feed, baseline: Optional[Tuple[int, int, int]]) -> None:
        self.path = path
        self.stream = stream
        self.baseline = baseline
        self.fd: Optional[int] = None
        self.inode = -1
        self.position = 0
        self.last_data = 0.0


class FileFollower:
    """Follows log files that a launcher writes (msrun ``worker_N.log``, torchrun's worker files), from their
    first byte, in the order they were given."""

    def __init__(self, files: Mapping[int, str], streams: Mapping[int, Feed]) -> None:
        self._files: List[_Followed] = []
        self._buffer = bytearray(CHUNK)
        for rank, path in sorted(files.items()):
            try:
                st = os.stat(path)
                baseline: Optional[Tuple[int, int, int]] = (st.st_ino, st.st_size, st.st_mtime_ns)
            except OSError:
                baseline = None
            self._files.append(_Followed(path, streams[rank], baseline))

    def add(self, path: str, stream: Feed) -> None:
        """Follow one more file, from its first byte, after those already followed (e.g. a file that a
        launcher made after the start: torchrun's per-attempt worker files)."""
        self._files.append(_Followed(path, stream, None))

    def poll(self) -> None:
        """Forward whatever was appended since the last call."""
        now = time.monotonic()
        for item in self._files:
            try:
                st = os.stat(item.path)
            except OSError:
                st = None
            if item.fd is not None and st is not None and st.st_ino != item.inode:
                self._read(item, now)  # replaced: finish the old file, then start on the new one
                os.close(item.fd)
                item.fd = None
            if item.fd is None:
                if st is None or (st.st_ino, st.st_size, st.st_mtime_ns) == item.baseline:
                    continue
                try:
                    item.fd = os.open(item.path, os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    continue
                item.inode = os.fstat(item.fd).st_ino
                item.position = 0
                item.baseline = None
                item.stream.opened(item.fd)
            elif st is not None and st.st_size < item.position:  # truncated and rewritten
                os.lseek(item.fd, 0, os.SEEK_SET)
                item.position = 0
                item.stream.opened(item.fd)
            if not self._read(item, now) and item.stream.holding and now - item.last_data > HOLD_SECONDS:
                item.stream.flush_partial()

    def _read(self, item: _Followed, now: float) -> bool:
        got = False
        while item.fd is not None:
            try:
                size = os.readv(item.fd, [self._buffer])
            except OSError:
                return got
            if not size:
                return got
            got = True
            item.position += size
            item.last_data = now
            item.stream.feed(self._buffer, size)
        return got

    def finish(self) -> None:
        """Read everything that is left and release the files."""
        self.poll()
        for item in self._files:
            item.stream.finish()
            if item.fd is not None:
                os.close(item.fd)
                item.fd = None


def follow(follower: FileFollower, stop: threading.Event, interval: float, tick: Callable[[], None]) -> None:
    """Thread body: poll the files every ``interval`` seconds (and call ``tick``) until ``stop``. The follower
    finishes however the loop ends (the console readers fed by it wait for that)."""
    try:
        while not stop.wait(interval):
            follower.poll()
            tick()
    finally:
        follower.finish()
