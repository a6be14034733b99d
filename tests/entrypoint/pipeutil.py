"""A pipe whose reader leaves once it is full, for the tests of output cut short (``write_all``, ``ma-submit``'s
output, the shim's ``--dry-run``)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from typing import Callable, Dict, List, Tuple

#: Long enough for a slow start of ``ma-submit`` or the shim on a loaded machine; only to avoid hanging.
TIMEOUT = 240.0


def bytes_in_pipe(read_end: int) -> int:
    """How many bytes wait unread in the pipe whose read end is ``read_end``."""
    import termios

    waiting = bytearray(4)
    fcntl.ioctl(read_end, termios.FIONREAD, waiting)
    return int.from_bytes(waiting, sys.byteorder)


def wait_until_full(read_end: int, size: int, writing: Callable[[], bool]) -> None:
    """Until ``size`` bytes wait in the pipe or the writer is done (``writing()`` false)."""
    deadline = time.monotonic() + TIMEOUT
    while bytes_in_pipe(read_end) < size and writing():
        assert time.monotonic() < deadline, f"the writer filled no pipe in {TIMEOUT:.0f} s"
        time.sleep(0.02)


def into_a_pipe_that_fills_then_closes(argv: List[str], env: Dict[str, str]) -> Tuple[int, str, int]:
    """Run ``argv`` with stdout into a one-page pipe that nobody reads; once the pipe is full (the writer blocked in
    the middle of its output), its reader goes away. Returns the exit code, stderr and the pipe's size: exactly the
    bytes that reached the reader's side before it left."""
    read_end, write_end = os.pipe()
    size = fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)  # the smallest (a page): what fits is known exactly
    try:
        process = subprocess.Popen(argv, env=env, stdout=write_end, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                   text=True, cwd=os.path.dirname(__file__))  # fmt: skip
        os.close(write_end)
        write_end = -1
        try:
            wait_until_full(read_end, size, lambda: process.poll() is None)
        finally:
            os.close(read_end)  # the reader leaves without reading a byte
        _, err = process.communicate(timeout=TIMEOUT)
    finally:
        if write_end >= 0:
            os.close(write_end)
    return process.returncode, err, size
