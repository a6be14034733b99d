"""Signals as malaunch reads them out of exit statuses: one home for the names and the two conventions.

An exit status can carry a signal two ways, and the callers want different things:

- :func:`signal_in_shell_code`: the shell's convention only, ``128+N`` (N 1-64), as a launcher, ``bash -c`` or
  the shim itself reports a killed child. A negative code stays a plain code: the report explains what it saw.
- :func:`signal_in_any_code`: also ``-N``, :class:`subprocess.Popen`'s ``returncode`` for a child it reaped
  itself; used where a failure is classified, whichever process's status it is.

Both return the signal given explicitly (``signal``, e.g. read from ``/proc`` or from a launcher's summary)
before looking at the code. Standard library only.
"""

from __future__ import annotations

import signal as _signal
from typing import Dict, Optional

__all__ = ["signal_hint", "signal_in_any_code", "signal_in_shell_code", "signal_name"]

_MAX_SIGNAL = 64

_HINTS: Dict[int, str] = {
    _signal.SIGKILL: "likely out of memory (OOM killer) or killed from outside",
    _signal.SIGSEGV: "segmentation fault, a crash in native code (a C/C++ extension or a driver)",
    _signal.SIGABRT: "aborted by native code (a failed assertion or an uncaught C++ exception)",
    _signal.SIGTERM: "terminated from outside (job stopped or preempted) or by the teardown of the job",
    _signal.SIGINT: "interrupted (Ctrl-C or SIGINT from outside)",
    _signal.SIGHUP: "hang-up: its terminal or session went away",
    _signal.SIGBUS: "bus error, often /dev/shm too small for data-loader workers",
    _signal.SIGFPE: "arithmetic error in native code",
    _signal.SIGILL: "illegal instruction: a binary built for another CPU",
    _signal.SIGPIPE: "broken pipe: it wrote to a pipe or socket nobody reads",
}


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 77`` for numbers without a name."""
    try:
        return _signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def signal_hint(number: int) -> Optional[str]:
    """What a process killed by signal ``number`` usually went through (9: likely out of memory); None when
    there is nothing to say beyond the name."""
    return _HINTS.get(number)


def signal_in_shell_code(code: int, signal: Optional[int]) -> Optional[int]:
    """``signal`` when given, else N for a shell-style exit code ``128+N`` (N 1-64), else ``None``."""
    if signal is not None:
        return signal
    if 128 < code <= 128 + _MAX_SIGNAL:
        return code - 128
    return None


def signal_in_any_code(code: int, signal: Optional[int]) -> Optional[int]:
    """Like :func:`signal_in_shell_code`, and N for Popen's ``-N`` as well."""
    if signal is None and code < 0:
        return -code
    return signal_in_shell_code(code, signal)
