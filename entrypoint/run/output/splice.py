"""A process's pipes to its log file at disk speed (``os.splice``), and the console copy read back from the file.

Used for the ``pipe`` log source (rank-table fan-out and single runs). Per process:

- one pump thread waits for data on both pipes (stdout, stderr) and moves it into the process's log file with
  ``os.splice``: the bytes go from the pipe to the page cache without passing through Python, and the GIL is
  released meanwhile. The rank only ever waits for the disk, never for the console.
- Both pipes share one file. Each splice runs under the file's lock and records the span of the file it
  wrote and the stream it came from (adjacent spans of one stream merge), so the order of the spans is the
  order of the file.
- One reader thread (:meth:`SpliceSink.forward`) takes the spans in order, reads them back (from the page
  cache) and feeds each to its stream's :class:`~.pump.LineStream`, which prefixes the lines and queues them
  on the console. Each stream holds its own partial line, so stdout and stderr never mix within a line.

The reader never holds up splicing, and the console never loses a line it could take: it waits for room in
the console's backlog, so a slow console only makes the copy late (the lag waits in the file). Spans are
skipped unread only while the console is stuck (it took nothing for :data:`~.console.CONSOLE_STUCK` s; the
reader resumes once it takes bytes again), when it is still behind at the drain deadline
(:data:`~.console.CONSOLE_DRAIN`), or when more than :data:`MAX_SPANS` spans wait (stdout and stderr
switching very often while the console lags). The console copy then resumes at the next whole line, after one
line saying how many bytes of which process were skipped and where its log is; the file gets every byte.

A log file that is not a regular file (``/dev/null``, a FIFO) is never spliced; when a splice fails, that
file falls back to the pump of old (the pipe read in Python, each chunk written with ``os.write``: ``EINVAL``
keeps every byte; ``ENOSPC``, ``EIO``, ``EFBIG`` are reported once, the output goes on to the console). A
failed splice leaves its bytes in the pipe, so nothing is lost; the chunks read that way travel to the reader
as in-memory spans, so the console order is kept.

The failure report's tail (:meth:`~.pump.Sink.text`) is read from the end of the file; after a fallback it
comes from memory, as for every other sink.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import time
from typing import List, Optional, Protocol, Sequence, Tuple

from . import spans as _spans
from .pump import CHUNK, HOLD_SECONDS, PIPE_SIZE, LineStream, PipeWait
from .sink import TAIL_BYTES, Bytes, Sink, Warn
from .spans import MAX_MEMORY, MAX_SPANS, Span, SpanQueue

__all__ = ["MAX_MEMORY", "MAX_SPANS", "SpliceSink", "splice_pump"]

# Half the pipe per splice call: the rank can fill one half while the other is copied into the page cache
# (measured here: 1 GB took ~0.55 s of CPU in 512 KiB calls against ~0.7 s in 1 MiB calls).
SPLICE_CHUNK = PIPE_SIZE // 2
_FLAGS = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK
# A file that cannot take splice (a device, O_APPEND, some filesystems): write() may still work there.
_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV, errno.ESPIPE})


class _Paced(Protocol):
    """What :meth:`SpliceSink.forward` needs of a console (:class:`~.console.Console` has it)."""

    @property
    def has_room(self) -> bool: ...

    @property
    def cut_off(self) -> bool: ...

    @property
    def patience(self) -> float: ...

    def wait_room(self) -> bool: ...


class SpliceSink(Sink):
    """The log file of one process fed by splice from its two pipes, with the spans the console copy needs.

    Stream 0 is stdout, 1 is stderr. :func:`splice_pump` feeds it, :meth:`forward` makes the console copy.
    """

    def __init__(self, path: str, warn: Warn, ring_bytes: int = TAIL_BYTES, *, write_file: bool = True) -> None:
        """Create (truncate) ``path`` for reading and writing; raises OSError when it cannot.

        ``write_file=False``: a file a launcher's worker writes itself (msrun's ``worker_N.log``); the shim only
        reads it, once the follower has opened it (:meth:`follow`, :meth:`grew`).
        """
        super().__init__(path, warn, ring_bytes, write_file=write_file, readable=True)
        # The reader reads the file back: it must be readable and a regular file (not /dev/null, a FIFO, ...).
        self._splicing = self.readable and self._fd is not None and stat.S_ISREG(os.fstat(self._fd).st_mode)
        self._read_fd: Optional[int] = None
        if self._splicing and self._fd is not None:
            self._read_fd = os.dup(self._fd)  # the reader's own: close() may release the file first
        self._reading = False  # forward() runs and owns _read_fd
        self._end = 0  # bytes spliced into the file
        self._spans = SpanQueue()
        self._lost = [0, 0]  # bytes of spans dropped (MAX_SPANS, MAX_MEMORY) since the reader last looked
        self._open_streams = 2
        self._forwarding = True
        self._changed = threading.Condition(self._lock)

    # -- the pumps' side ----------------------------------------------------------------------------------------
    def splice(self, src: int, stream: int) -> bool:
        """Move what pipe ``src`` holds (up to :data:`SPLICE_CHUNK` bytes) to the file; where the file takes no
        splice (any more), read the pipe here and :meth:`take` the bytes. False once the pipe has ended (or cannot
        be read)."""
        with self._lock:
            if self._splicing and self._fd is not None:
                try:
                    size = os.splice(src, self._fd, SPLICE_CHUNK, flags=_FLAGS)
                except BlockingIOError:
                    return True  # nothing there right now
                except OSError as error:
                    self._fall_back(error)
                else:
                    if size:
                        self._add(stream, self._end, self._end + size, None)
                        self._end += size
                    return size != 0
        try:
            data = os.read(src, CHUNK)
        except OSError:
            return False
        if data:
            self.take(stream, data)
        return bool(data)

    def copy(self, stream: int, data: Bytes) -> None:
        """Bytes a follower read from a file a worker writes itself (torchrun's per-attempt files): appended to
        this file with write() at full speed, and a span for the console reader, as :meth:`splice` records.

        ``data`` is only used during the call. When the file fails part-way, what it took stays a file span and
        the rest travels as an in-memory span (as after a failed splice).
        """
        with self._lock:
            view = memoryview(data)
            if self._splicing and self._fd is not None:
                start = self._end
                try:
                    while view:
                        written = os.write(self._fd, view)
                        self._end += written
                        view = view[written:]
                except OSError as error:  # write() itself failed (ENOSPC, EIO, EFBIG): said once, file left
                    self._seed_ring()
                    self._fail(error)
                if self._end > start:
                    self._add(stream, start, self._end, None)
            if view:
                self._take(stream, bytes(view))

    def follow(self, fd: int) -> None:
        """The follower opened the file (``fd``, read-only) a launcher's worker writes (``write_file=False``): the
        console copy and the tail are read from it. A second file (replaced, or cut and rewritten) is not read
        back: from then on its bytes travel as in-memory spans, as after a failed splice."""
        with self._lock:
            if self._owned is None and self._read_fd is None and not self._cut and not self._ring:
                self._owned = self._fd = os.dup(fd)
                self._read_fd = os.dup(fd)
                self.readable = True  # the tail is read back from it too
                self._splicing = stat.S_ISREG(os.fstat(fd).st_mode)
                self._end = 0
            else:
                self._seed_ring()

    def grew(self, stream: int, data: Bytes) -> None:
        """The followed file grew by ``data`` (only used during the call): a span for the console reader."""
        with self._lock:
            if self._splicing:
                self._add(stream, self._end, self._end + len(data), None)
                self._end += len(data)
            else:
                chunk = bytes(data)
                self._keep(chunk)
                self._add(stream, 0, len(chunk), chunk)

    def take(self, stream: int, data: bytes) -> None:
        """A chunk read from pipe ``stream`` after the fallback: to the file with write(), then to the console."""
        with self._lock:
            self._take(stream, data)

    def _take(self, stream: int, data: bytes) -> None:
        """:meth:`take` with the lock held."""
        self._append(data)
        self._add(stream, 0, len(data), data)

    def end(self, stream: int) -> None:
        """Pipe ``stream`` has ended (or was abandoned)."""
        with self._lock:
            self._open_streams -= 1
            self._changed.notify_all()

    def _fall_back(self, error: OSError) -> None:
        """Splicing failed (lock held): the tail so far goes to memory, the file to write() or to nothing."""
        self._seed_ring()
        if error.errno not in _UNSUPPORTED:
            self._fail(error)

    def _add(self, stream: int, start: int, end: int, data: Optional[bytes]) -> None:
        """Record a span for the console reader (lock held); merge it with the last one if they touch."""
        if not self._forwarding:
            return
        spans = self._spans
        spans.add(stream, start, end, data)
        while spans.over():
            old = spans.pop()
            if old is None:
                break
            self._lost[old.stream] += old.end - old.start
        self._changed.notify()

    def _size(self) -> int:
        return self._end + self._written  # spliced (or copied), then written after a fallback

    # -- the tail ---------------------------------------------------------------------------------------------
    def _file_tail(self) -> bytes:
        """The last ``ring_bytes`` spliced into the file (lock held); empty if the file cannot be read."""
        if self._fd is None or not self.readable:
            return b""
        start = max(0, self._end - self._ring_bytes)
        try:
            return os.pread(self._fd, self._end - start, start)
        except OSError:
            return b""

    def _seed_ring(self) -> None:
        """Stop splicing (lock held); the tail of what was spliced becomes the tail kept in memory."""
        if self._splicing:
            self._splicing = False
            tail = self._file_tail()
            self._keep(tail)
            self._cut = self._cut or self._end > len(tail)

    def _snapshot(self) -> Tuple[bytes, bool]:
        if self._splicing:
            raw = self._file_tail()
            return raw, self._end > len(raw)
        return super()._snapshot()

    def close(self) -> None:
        """Release the file (idempotent); the tail stays readable from memory."""
        with self._lock:
            self._seed_ring()
            read_fd, self._read_fd = (None, self._read_fd) if self._reading else (self._read_fd, None)
        if read_fd is not None:
            os.close(read_fd)
        super().close()

    # -- the console reader -------------------------------------------------------------------------------------
    def _next(self, wait: Optional[float]) -> Tuple[Optional[Span], List[int], bool]:
        """The next span (waiting up to ``wait`` s for one), the bytes of each stream whose spans were dropped,
        and whether all ended."""
        with self._lock:
            if not len(self._spans) and self._open_streams > 0 and wait != 0:
                self._changed.wait(wait)
            lost = self._lost
            self._lost = [0, 0]
            span = self._spans.pop()
            return span, lost, span is None and self._open_streams <= 0

    def forward(self, streams: Sequence[LineStream], consoles: Sequence[_Paced], warn: Warn) -> None:
        """Thread body: feed every span, in file order, to ``streams[span.stream]`` until both pipes ended.

        ``consoles[i]`` is the console behind ``streams[i]``. Before each chunk the reader waits for its room
        (lag, not loss: the bytes wait in the file); only while it is stuck, or past the drain deadline after
        the end, are spans skipped unread, and the stream says so in one line when it resumes.
        """
        _ReadBack(self, streams, consoles, warn).run()


class _ReadBack:
    """The console reader of one :class:`SpliceSink`: reads its spans back from the file, in file order."""

    def __init__(self, sink: SpliceSink, streams: Sequence[LineStream], consoles: Sequence[_Paced], warn: Warn) -> None:
        self.sink, self.streams, self.consoles, self.warn = sink, streams, consoles, warn

    def run(self) -> None:
        sink, streams, warn = self.sink, self.streams, self.warn
        with sink._lock:
            sink._reading = True
            fd = sink._read_fd
        last = [0.0, 0.0]
        gate = _Gate(self.consoles)
        try:
            while True:
                due = [last[i] + HOLD_SECONDS for i, stream in enumerate(streams) if stream.holding]
                wait = max(0.0, min(due) - time.monotonic()) if due else None
                span, lost, finished = sink._next(wait)
                for index, count in enumerate(lost):
                    if count:
                        streams[index].skip(count, _behind())
                if span is None:
                    if finished:
                        break
                    now = time.monotonic()
                    for index, stream in enumerate(streams):
                        if stream.holding and now - last[index] >= HOLD_SECONDS:
                            stream.flush_partial()
                    continue
                last[span.stream] = time.monotonic()
                fd = sink._read_fd if fd is None else fd  # a followed file is opened after the reader starts
                self._copy(span, fd, gate)
            for stream in streams:
                stream.finish()
        except Exception as error:  # a bug here must not stall the job: the file still gets every byte
            warn(
                f"output of this process is no longer copied to the console ({type(error).__name__}: {error}); "
                f"its log file {sink.path} still gets every byte"
            )
            with sink._lock:
                sink._forwarding = False
                sink._spans.clear()
        finally:
            with sink._lock:
                sink._reading = False
                fd, sink._read_fd = sink._read_fd, None
            if fd is not None:
                os.close(fd)

    def _copy(self, span: Span, fd: Optional[int], gate: _Gate) -> None:
        """One span to its stream, chunk by chunk, as the console makes room; the rest skipped when it cannot."""
        stream = self.streams[span.stream]
        position = span.start
        while position < span.end:
            reason = gate.closed(span.stream)
            data = b""
            if not reason:
                if span.data is not None:
                    data = span.data
                elif fd is not None:
                    with contextlib.suppress(OSError):
                        data = os.pread(fd, min(CHUNK, span.end - position), position)
                reason = "" if data else "its log file was cut short"
            if reason:
                stream.skip(span.end - position, reason, self._ends_line(fd, span))
                break
            stream.feed(data, len(data))  # a fresh bytes object: the stream queues it without a copy
            position += len(data)

    @staticmethod
    def _ends_line(fd: Optional[int], span: Span) -> bool:
        """Whether the last byte of ``span`` is a newline (the console can resume right after it)."""
        if span.data is not None:
            return span.data.endswith(b"\n")
        if fd is None or span.end <= span.start:
            return False
        try:
            return os.pread(fd, 1, span.end - 1) == b"\n"
        except OSError:
            return False


def _behind() -> str:
    return (
        f"the console copy fell too far behind: more than {_spans.MAX_SPANS} pieces "
        f"or {_spans.MAX_MEMORY >> 20} MiB waited"
    )


class _Gate:
    """Whether the console reader may read the next chunk of a stream: waits for the console's room; a stuck
    console (or one past the drain deadline) closes the gate until the console takes bytes again."""

    def __init__(self, consoles: Sequence[_Paced]) -> None:
        self._consoles = consoles
        self._stuck = [False] * len(consoles)

    def closed(self, stream: int) -> str:
        """Empty when the chunk may be read and sent; else why it is skipped."""
        console = self._consoles[stream]
        if console.cut_off:
            return "the console was still behind when the drain after the end ran out of time"
        stuck = f"the console was stuck: it accepted nothing for {console.patience:g} s"
        if self._stuck[stream]:
            if not console.has_room:
                return stuck
            self._stuck[stream] = False
        if console.wait_room():
            return ""
        self._stuck[stream] = True
        return stuck


def splice_pump(fds: Sequence[int], sink: SpliceSink, stop: threading.Event) -> None:
    """Thread body: move a process's pipes ``fds`` (stream 0 = stdout, 1 = stderr) into ``sink`` until each has
    ended, or, once ``stop`` is set, until none has more to give (at most :data:`~.pump.DRAIN_LIMIT` s). One thread
    serves both pipes: each splice holds the sink's lock, so two threads would only take turns."""
    wait = PipeWait(fds, stop)
    streams = dict(enumerate(fds))  # the pipes not ended yet: stream -> fd
    try:
        while streams:
            ready = wait.ready(200)
            if ready is None:
                break
            for stream, fd in list(streams.items()):
                if fd in ready and not sink.splice(fd, stream):
                    del streams[stream]
                    wait.forget(fd)
                    sink.end(stream)
    finally:
        for stream in streams:
            sink.end(stream)
