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


def _blocked_writing_a_pipe(pid: int) -> bool:
    """Whether a thread of process ``pid`` sleeps in the kernel's pipe write (``pipe_write``, ``anon_pipe_write``)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/wchan") as handle:
                if "pipe_write" in handle.read():
                    return True
        except OSError:
            continue
    return False


def wait_until_blocked(read_end: int, pid: int, writing: Callable[[], bool]) -> int:
    """Until a thread of ``pid`` is blocked writing into the pipe (what waits in it is then all it will get) or the
    writer is done (``writing()`` false); returns the bytes waiting in the pipe then. A pipe of one page is not
    always full when its writer blocks: a write that does not fit the page's rest waits whole."""
    deadline = time.monotonic() + TIMEOUT
    while writing() and not _blocked_writing_a_pipe(pid):
        assert time.monotonic() < deadline, f"the writer neither blocked on the pipe nor ended in {TIMEOUT:.0f} s"
        time.sleep(0.02)
    return bytes_in_pipe(read_end)


def into_a_pipe_that_fills_then_closes(argv: List[str], env: Dict[str, str]) -> Tuple[int, str, int]:
    """Run ``argv`` with stdout into a one-page pipe that nobody reads; once the writer is blocked on it, in the middle
    of its output, its reader goes away. Returns the exit code, stderr, and the bytes that had reached the reader's
    side before it left (what waited in the pipe). The process is killed if it neither blocks nor ends in time.

    Only stdout may block: stderr goes to a pipe of the default size (64 KiB), which the tests' stderr never fills."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)  # the smallest (a page): the cut comes early
    try:
        process = subprocess.Popen(argv, env=env, stdout=write_end, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                   text=True, cwd=os.path.dirname(__file__))  # fmt: skip
        os.close(write_end)
        write_end = -1
        try:
            fitted = wait_until_blocked(read_end, process.pid, lambda: process.poll() is None)
        except BaseException:
            process.kill()  # our own child, never reaped yet: its pid cannot be another's
            process.wait()
            raise
        finally:
            os.close(read_end)  # the reader leaves without reading a byte
        _, err = process.communicate(timeout=TIMEOUT)
    finally:
        if write_end >= 0:
            os.close(write_end)
    return process.returncode, err, fitted
