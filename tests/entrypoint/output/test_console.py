"""The console never makes a producer wait: a pipe nobody reads costs console lines, never time."""

from __future__ import annotations

import io
import os
import threading
import time

import pytest
from malaunch.entrypoint.run.output import console as _console
from malaunch.entrypoint.run.output.console import CONSOLE_BACKLOG, Console
from malaunch.entrypoint.run.output.pump import LineStream


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


def _read_all(fd: int, into: bytearray) -> None:
    while True:
        data = os.read(fd, 1 << 16)
        if not data:
            return
        into += data


def test_a_dropped_write_never_glues_the_next_line_to_a_partial_one() -> None:
    """The partial line's newline dropped while the backlog is full: the next line still starts on a new one."""
    read_fd, write_fd = os.pipe()
    got = bytearray()
    try:
        with os.fdopen(write_fd, "wb", closefd=False) as stream:
            console = Console(stream)
            owner = object()
            console.emit(owner, [b"y" * (CONSOLE_BACKLOG - 8), b"\n[a] par"])  # fills the backlog, ends mid-line
            console.emit(owner, [b"tial\n"])  # the end of that line finds no room: dropped
            assert console.dropped == 1
            reader = threading.Thread(target=_read_all, args=(read_fd, got))
            reader.start()
            deadline = time.monotonic() + 60
            while console._queued:  # wait until the backlog went out
                assert time.monotonic() < deadline
                time.sleep(0.01)
            console.emit(owner, [b"[a] next\n"])
            console.close(patience=5.0)
        os.close(write_fd)
        reader.join(30)
    finally:
        os.close(read_fd)
    assert got.endswith(b"y\n[a] par\n[a] next\n"), bytes(got[-40:])


def test_a_paced_stream_waits_for_room_and_says_where_it_skipped() -> None:
    buffer = io.BytesIO()
    console = Console(buffer)
    assert console.wait_room() and console.has_room
    stream = LineStream(console, b"[p] ", None, gap_note=lambda count, why: f"[note] {count} bytes skipped: {why}")
    stream.feed(b"epoch 1\nprogress 10%", 20)
    stream.flush_partial()  # part of a line shown ...
    stream.skip(1000, "stuck")  # ... then bytes skipped: the shown part is ended, never glued to what follows
    stream.feed(b"0%\nepoch 2\n", 11)  # resumes at the next whole line, after the note
    stream.skip(50, "stuck", at_line_start=True)  # skipped bytes that ended with a newline ...
    stream.feed(b"epoch 9\n", 8)  # ... the next line is whole: shown
    stream.finish()
    console.close(patience=1.0)
    assert buffer.getvalue() == (
        b"[p] epoch 1\n[p] progress 10%\n[note] 1003 bytes skipped: stuck\n[p] epoch 2\n"
        b"[note] 50 bytes skipped: stuck\n[p] epoch 9\n"
    )


def test_paced_writes_are_never_dropped_and_a_stuck_console_is_told_apart_from_a_slow_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_console, "CONSOLE_STUCK", 0.5)
    read_fd, write_fd = os.pipe()
    try:
        with os.fdopen(write_fd, "wb", closefd=False) as stream:
            console = Console(stream)
            chunk = b"z" * (1 << 20)
            for _ in range(CONSOLE_BACKLOG // len(chunk) + 2):
                console.emit(console, [chunk], keep=True)
            assert console.dropped == 0 and not console.has_room
            assert not console.wait_room()  # nobody reads: stuck after CONSOLE_STUCK s without progress
            got = bytearray()
            reader = threading.Thread(target=_read_all, args=(read_fd, got))
            reader.start()
            assert console.wait_room()  # a reader again: room comes
            console.close(patience=5.0)
        os.close(write_fd)
        reader.join(30)
    finally:
        os.close(read_fd)
    assert len(got) == (CONSOLE_BACKLOG // len(chunk) + 2) * len(chunk)
