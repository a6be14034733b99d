"""A log file the shim writes, and the tail of the output it keeps in memory for the failure report."""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Callable, Optional, Tuple, Union

__all__ = ["TAIL_BYTES", "Sink"]

TAIL_BYTES = 64 << 10

Bytes = Union[bytes, memoryview]
Warn = Callable[[str], None]


class Sink:
    """One log destination (a file it opens, owns and closes; or none when the launcher writes the file) plus
    the tail kept in memory."""

    def __init__(
        self, path: str, warn: Warn, ring_bytes: int = TAIL_BYTES, *, write_file: bool = True, readable: bool = False
    ) -> None:
        """Open (create, truncate) ``path`` when ``write_file``; raises OSError when it cannot.

        ``readable`` opens it for reading too (when permissions allow; :attr:`readable` says whether they did).
        """
        self.path = path
        self._fd: Optional[int] = None
        self._owned: Optional[int] = None
        self.readable = False
        if write_file:
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            flags = os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
            if readable:
                with contextlib.suppress(PermissionError):
                    self._owned = os.open(path, os.O_RDWR | flags, 0o644)
                    self.readable = True
            if self._owned is None:
                self._owned = os.open(path, os.O_WRONLY | flags, 0o644)
            self._fd = self._owned
        self._warn = warn
        self._written = 0  # bytes in the file
        self.lost_at: Optional[int] = None  # the file failed: the byte of output from which it holds nothing
        self.lost_reason = ""
        self._ring = bytearray()
        self._ring_bytes = ring_bytes
        self._cut = False
        self._lock = threading.Lock()

    def write(self, data: Bytes) -> None:
        """Append to the file (a failing file is reported once and then skipped) and to the tail."""
        with self._lock:
            self._append(data)

    def _append(self, data: Bytes) -> None:
        """:meth:`write` with the lock held."""
        self._keep(data)
        if self._fd is not None:
            view = memoryview(data)
            try:
                while view:
                    written = os.write(self._fd, view)
                    self._written += written
                    view = view[written:]
            except OSError as error:
                self._fail(error)

    def _keep(self, data: Bytes) -> None:
        """Add ``data`` to the tail kept in memory (lock held)."""
        if len(data) > self._ring_bytes:
            self._ring += data[-self._ring_bytes :]
            self._cut = True
        else:
            self._ring += data
        if len(self._ring) > 2 * self._ring_bytes:
            del self._ring[: len(self._ring) - self._ring_bytes]
            self._cut = True

    def _size(self) -> int:
        """The bytes of output the file holds (lock held)."""
        return self._written

    def _fail(self, error: OSError) -> None:
        """The file cannot be written: say once from which byte its output is lost, and stop writing it (lock
        held; close() still releases it). What the file took stays in it."""
        self._fd = None
        self.lost_at = self._size()
        self.lost_reason = error.strerror or str(error)
        self._warn(
            f"cannot write log file {self.path}: {self.lost_reason}; it holds the output up to byte {self.lost_at}, "
            "the rest continues on the console only (free space or fix the log directory)"
        )

    def close(self) -> None:
        """Release the file (idempotent); later writes only feed the tail."""
        with self._lock:
            fd, self._owned, self._fd = self._owned, None, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _snapshot(self) -> Tuple[bytes, bool]:
        """The retained bytes, and whether they start mid-way through the output (lock held)."""
        return bytes(self._ring), self._cut

    def text(self) -> str:
        """The retained output, decoded leniently."""
        with self._lock:
            raw, cut = self._snapshot()
        text = raw.decode("utf-8", "replace")
        if cut and "\n" in text:  # the first line is a fragment of a line whose start is gone
            text = text.partition("\n")[2]
        # without a newline the bytes kept are the end of one long line: they are the output's tail, kept
        return text

    def tail(self, count: int = 50) -> Tuple[str, ...]:
        """The last ``count`` lines of output."""
        lines = [line.rstrip("\r") for line in self.text().split("\n")]
        if lines and lines[-1] == "":
            lines.pop()
        return tuple(lines[-count:])
