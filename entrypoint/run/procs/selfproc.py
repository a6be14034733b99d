"""This process's own settings: the child subreaper and the stop-signal handlers of a run.

The subreaper is set through ``prctl`` (ctypes); best effort, standard library only. (The watchdog program names
itself through ``/proc/self/comm``, :mod:`.watchdog`: it loads no ctypes.)
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Optional

if TYPE_CHECKING:
    import ctypes

__all__ = ["STOP_SIGNALS", "restore_subreaper", "set_subreaper", "stop_signal_handlers"]

#: The signals that stop a run (the shim's, a restart loop's back-off): 128 + the signal is the result.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37

_libc: Optional[ctypes.CDLL] = None


def _libc_handle() -> ctypes.CDLL:
    """The C library, loaded once."""
    global _libc

    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _prctl(option: int, value: int) -> Optional[int]:
    """prctl(option, value) or, for the GET option, the value read; None when unavailable."""

    try:
        libc = _libc_handle()
        if option == _PR_GET_CHILD_SUBREAPER:
            out = ctypes.c_int(0)
            rc = libc.prctl(option, ctypes.byref(out), 0, 0, 0)
            return out.value if rc == 0 else None
        rc = libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0)
        return value if rc == 0 else None
    except (OSError, AttributeError):
        return None


def set_subreaper() -> Optional[int]:
    """Make this process the child subreaper; returns the previous setting, None if unsupported."""
    previous = _prctl(_PR_GET_CHILD_SUBREAPER, 0)
    if previous is None or _prctl(_PR_SET_CHILD_SUBREAPER, 1) is None:
        return None
    return previous


def restore_subreaper(previous: Optional[int]) -> None:
    """Undo :func:`set_subreaper` (a no-op when it had not succeeded)."""
    if previous is not None:
        _prctl(_PR_SET_CHILD_SUBREAPER, previous)


@contextlib.contextmanager
def stop_signal_handlers(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """``handler`` for every :data:`STOP_SIGNALS` while the block runs (main thread only: elsewhere nothing is
    installed), then the previous handlers again."""

    previous: Dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
