"""``write_all`` on a real pipe whose reader leaves once it is full: Python's own buffered writer, in a process's main
thread as ``ma-submit`` writes, returns what fitted and drops the rest in silence (the control, which shows the pipe
does reproduce the loss); ``write_all`` raises ``StreamClosed`` with exactly the bytes that reached the pipe, in the
main thread and in another, and writes everything when the reader stays."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import os
import sys
import threading
from typing import List

import pytest
from malaunch.entrypoint.report.streams import OutputCut, StreamClosed, write_all
from pipeutil import into_a_pipe_that_fills_then_closes, wait_until_blocked

DATA = bytes(range(256)) * 200  # 51,200 bytes: more than the pipe (4 KiB) and the writer's buffer (8 KiB)

# Writes DATA to stdout in the main thread, as ma-submit does, then says on stderr what the write gave.
_WRITER = """
import sys
from malaunch.entrypoint.report.streams import StreamClosed, write_all
data = bytes(range(256)) * 200
if sys.argv[1] == "python":
    sys.stderr.write(f"returned {sys.stdout.buffer.write(data)}")
    sys.stdout.buffer.flush()
else:
    try:
        write_all(sys.stdout.buffer, data)
    except StreamClosed as closed:
        sys.stderr.write(f"closed after {closed.written}")
        sys.exit(1)
"""


def test_pythons_own_writer_drops_the_rest_in_silence() -> None:
    """The control: the pipe really reproduces the loss that write_all is for."""
    code, err, fitted = into_a_pipe_that_fills_then_closes([sys.executable, "-c", _WRITER, "python"],
                                                           dict(os.environ))  # fmt: skip
    assert (code, err) == (0, f"returned {fitted}"), "the control no longer loses output in silence"


def test_write_all_says_what_reached_the_pipe() -> None:
    code, err, fitted = into_a_pipe_that_fills_then_closes([sys.executable, "-c", _WRITER, "write_all"],
                                                         dict(os.environ))  # fmt: skip
    assert (code, err) == (1, f"closed after {fitted}")


def test_write_all_in_a_thread_too() -> None:
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    raised: List[BaseException] = []
    writer = io.BufferedWriter(io.FileIO(write_end, "w"))

    def run() -> None:
        try:
            write_all(writer, DATA)
        except OSError as error:
            raised.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        fitted = wait_until_blocked(read_end, os.getpid(), thread.is_alive)
    finally:
        os.close(read_end)
        thread.join(30.0)
    with contextlib.suppress(OSError):  # what the writer still holds cannot go anywhere
        writer.close()
    (closed,) = raised
    assert isinstance(closed, StreamClosed) and isinstance(closed, BrokenPipeError)
    assert (closed.errno, closed.written) == (errno.EPIPE, fitted)


def test_write_all_writes_everything_to_a_reader_that_stays() -> None:
    read_end, write_end = os.pipe()
    got = bytearray()

    def read() -> None:
        while chunk := os.read(read_end, 1 << 16):
            got.extend(chunk)

    thread = threading.Thread(target=read)
    thread.start()
    with io.BufferedWriter(io.FileIO(write_end, "w")) as writer:
        writer.write(b"held first;")  # in the buffer: it goes before DATA
        write_all(writer, DATA)
    thread.join(30.0)
    os.close(read_end)
    assert bytes(got) == b"held first;" + DATA


def test_write_all_on_a_stream_without_a_raw_file() -> None:
    sink = io.BytesIO()
    write_all(sink, DATA)
    assert sink.getvalue() == DATA
    with pytest.raises(OSError, match="took no bytes"):
        write_all(_TakesNothing(), b"x")


class _TakesNothing(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, data: object) -> None:  # type: ignore[override]
        return None  # a non-blocking file that is full


def test_a_full_disk_is_an_output_cut_with_its_own_words() -> None:
    with open("/dev/full", "wb") as full, pytest.raises(OutputCut) as cut:
        write_all(full, DATA)
    assert not isinstance(cut.value, BrokenPipeError)
    assert (cut.value.errno, cut.value.written) == (errno.ENOSPC, 0)
    assert (cut.value.why, cut.value.advice) == ("the write failed: No space left on device",
                                                 "free space or send it elsewhere")  # fmt: skip
    closed = StreamClosed(7)
    assert (closed.why, closed.advice) == ("whoever read it closed the pipe", "send it to a file to keep all of it")
