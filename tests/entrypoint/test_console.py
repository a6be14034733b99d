"""The console never makes a producer wait: a pipe nobody reads costs console lines, never time."""

from __future__ import annotations

import io
import os
import time

from malaunch.entrypoint._console import CONSOLE_BACKLOG, Console


def test_a_stuck_pipe_drops_console_writes_and_close_gives_up() -> None:
    read_fd, write_fd = os.pipe()
    try:
        with os.fdopen(write_fd, "wb", closefd=False) as stream:
            console = Console(stream)
            line = b"y" * 1000 + b"\n"
            started = time.monotonic()
            for _ in range(3 * CONSOLE_BACKLOG // len(line)):  # far more than the pipe and the backlog hold
                console.emit(console, [line])
            assert time.monotonic() - started < 10  # emit only queues: it never waited for the reader
            assert console.dropped > 0
            started = time.monotonic()
            console.close(patience=0.5)
            assert time.monotonic() - started < 5
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_every_line_arrives_in_order_on_a_console_that_keeps_up() -> None:
    buffer = io.BytesIO()
    console = Console(buffer)
    a, b = object(), object()
    console.emit(a, [b"[a] one\n"])
    console.emit(b, [b"[b] par"])
    console.emit(a, [b"[a] two\n"])
    console.emit(b, [b"tial\n"], resume=b"[b] ")
    console.close(patience=1.0)
    assert buffer.getvalue() == b"[a] one\n[b] par\n[a] two\n[b] tial\n"
    assert console.dropped == 0
