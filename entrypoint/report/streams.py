"""The shim's and ``ma-submit``'s own output, written in full or not at all in silence.

Python's buffered writer can lose output in silence. A write larger than its buffer (8 KiB) goes to the pipe at once.
If the pipe fills and then its reader goes away (``ma-submit list | head``), write(2) returns what fitted and the
writer returns that count. It drops the rest with no error. (Python 3.11, in a process's main thread: 51,200 bytes
into a one-page pipe whose reader left unread; ``write`` returned 4,096 and ``flush`` raised nothing.) Elsewhere the
same cut shows as a traceback. :func:`write_all` writes what is left again, so a closed pipe is raised as
:class:`StreamClosed`, which says how much got through, and never lost unsaid; any other failure (a full
disk) as :class:`OutputCut`, with the same count.

Used by the shim (``--dry-run``'s plan) and by the SDK (every line ``ma-submit`` prints, and ``exec``'s output): the
SDK may import the entrypoint, never the other way round. Standard library only.
"""

from __future__ import annotations

import errno
from typing import BinaryIO

__all__ = ["OutputCut", "StreamClosed", "write_all"]


class OutputCut(OSError):
    """Writing failed after ``written`` bytes of this write had reached the stream (``errno`` and ``strerror`` are
    the failure's: a full disk, an I/O error). :attr:`why` and :attr:`advice` are the words the shim and
    ``ma-submit`` both say it with."""

    def __init__(self, code: int, reason: str, written: int) -> None:
        super().__init__(code, reason)
        self.written = written

    @property
    def why(self) -> str:
        return f"the write failed: {self.strerror}"

    @property
    def advice(self) -> str:
        return "free space or send it elsewhere"


class StreamClosed(OutputCut, BrokenPipeError):
    """Whoever read the stream went away (EPIPE) after ``written`` bytes of this write had reached it.

    A :class:`BrokenPipeError`, so code that ends on a closed pipe by its errno or class (click's ``main``) ends on
    this too.
    """

    def __init__(self, written: int) -> None:
        super().__init__(errno.EPIPE, "Broken pipe", written)

    @property
    def why(self) -> str:
        return "whoever read it closed the pipe"

    @property
    def advice(self) -> str:
        return "send it to a file to keep all of it"


def write_all(binary: BinaryIO, data: bytes) -> None:
    """Write ``data`` to ``binary`` (a byte stream, buffered or not) to its last byte.

    What the stream held is flushed first; then ``data`` goes to the file under the buffer (``binary.raw``) where
    there is one, so that every byte counted in :class:`OutputCut` had reached the reader's side.

    Raises:
        StreamClosed: the reader went away; ``written`` bytes of ``data`` had reached the stream.
        OutputCut: any other failure to write (the same count).
    """
    done = 0
    try:
        binary.flush()
        target = getattr(binary, "raw", binary)
        while done < len(data):  # usually one write; a pipe or a signal may take less
            taken = target.write(memoryview(data)[done:] if done else data)
            if not taken:  # None from a non-blocking file that is full; never spin on it
                raise OSError(errno.EAGAIN, "the stream took no bytes")
            done += taken
    except BrokenPipeError:
        raise StreamClosed(done) from None
    except OSError as error:
        raise OutputCut(error.errno or errno.EIO, error.strerror or str(error), done) from None
