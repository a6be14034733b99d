"""A command on a terminal of its own (``ma-submit exec -t`` on the local backend, as ``kubectl exec -t``).

:func:`run_on_terminal` allocates a pseudo-terminal, starts the command as the leader of a new session with
that terminal as its controlling terminal and as its stdin, stdout and stderr, and copies what the command
writes to this process's stdout (or keeps it, with ``capture``). With ``forward_input`` this process's stdin
goes to the command, this terminal switched to raw mode meanwhile (restored after, whatever happens), so
``vim`` and ``top`` work; without it the command's terminal gets no input. The window size is copied from
this process's terminal when it has one, at the start and again at each SIGWINCH (a window resized), so the
command sees every resize as it would on our terminal.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import signal
import subprocess
import sys
import termios
import tty
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

__all__ = ["run_on_terminal"]

_CHUNK = 65536


def _own_terminal() -> Optional[int]:
    """A file descriptor of this process's terminal (stdin, else stdout), or None."""
    for fd in (0, 1):
        with contextlib.suppress(OSError, ValueError):
            if os.isatty(fd):
                return fd
    return None


@contextlib.contextmanager
def _raw(fd: Optional[int]) -> Iterator[None]:
    """This terminal in raw mode for the block (input goes to the command key by key), restored after."""
    if fd is None:
        yield
        return
    try:
        saved = termios.tcgetattr(fd)
    except termios.error:
        yield
        return
    tty.setraw(fd, termios.TCSANOW)  # keys typed ahead are kept
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _take_terminal() -> None:  # in the child, after setsid: the pty (its stdin) becomes its controlling terminal
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _copy_size(own: Optional[int], target: int) -> None:
    """Our terminal's window size onto ``target`` (the command's terminal; its session gets SIGWINCH)."""
    if own is not None:
        with contextlib.suppress(OSError):
            fcntl.ioctl(target, termios.TIOCSWINSZ, fcntl.ioctl(own, termios.TIOCGWINSZ, b"\0" * 8))


@contextlib.contextmanager
def _passing_resizes(own: Optional[int], master: int) -> Iterator[None]:
    """While the block runs, each SIGWINCH to this process copies our window size to the command's terminal."""
    if own is None:
        yield
        return
    try:
        previous = signal.signal(signal.SIGWINCH, lambda signum, frame: _copy_size(own, master))
    except ValueError:  # not the main thread: no handler can be set, the size stays the one copied at the start
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGWINCH, previous)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def run_on_terminal(
    argv: Sequence[str],
    *,
    env: Dict[str, str],
    cwd: str,
    forward_input: bool,
    capture: bool,
) -> Tuple[int, bytes]:
    """Run ``argv`` on a new pseudo-terminal (see the module docstring); its return code and, with
    ``capture``, what it wrote (else that went to this process's stdout as it came).

    Raises:
        OSError: the command could not be started (not found, not executable).
    """
    master, slave = os.openpty()
    own = _own_terminal()
    _copy_size(own, slave)
    try:
        proc = subprocess.Popen(
            list(argv), env=env, cwd=cwd, stdin=slave, stdout=slave, stderr=slave,
            start_new_session=True, preexec_fn=_take_terminal,
        )  # fmt: skip
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    kept: List[bytes] = []
    sources = [master, 0] if forward_input else [master]
    try:
        with _raw(0 if forward_input and own == 0 else None), _passing_resizes(own, master):
            while True:
                ready, _, _ = select.select(sources, [], [], 0.2)
                if not ready and proc.poll() is not None:
                    break  # it ended; a process it left behind may hold the terminal, but that is not waited for
                if 0 in ready:
                    data = os.read(0, _CHUNK)
                    if data:
                        _write_all(master, data)
                    else:
                        sources.remove(0)  # our input ended; the command keeps its terminal
                if master in ready:
                    try:
                        data = os.read(master, _CHUNK)
                    except OSError as exc:
                        if exc.errno != errno.EIO:  # EIO: every process holding the terminal has gone
                            raise
                        data = b""
                    if not data:
                        break
                    if capture:
                        kept.append(data)
                    else:
                        sys.stdout.flush()
                        _write_all(1, data)
    finally:
        os.close(master)
    return proc.wait(), b"".join(kept)
