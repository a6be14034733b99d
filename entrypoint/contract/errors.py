"""Exception tree of the entrypoint shim and the one table that maps it to exit codes.

::
    EntrypointError                  any failure the shim reports itself (never a traceback)
    ├── ConfigError                  bad environment, argument or file: exit 2
    │   └── RankTableError           a rank table that cannot be used
    ├── LaunchError                  something could not be started or waited for: exit 3
    │   └── WaitTimeout              a deadline passed (rank table never completed, master name never resolved)
    └── Interrupted                  SIGINT/SIGTERM/SIGHUP arrived while the shim waited, before any rank ran:
                                     exit 128+signal (130, 143, 129)

Values in messages are shortened (:func:`shorten`): a 100,000-character variable is never echoed whole.

A rank that fails is not an exception: the supervisor returns a ``RunResult`` and ``main`` turns it into the
root-cause rank's own exit code. Exit codes are decided only in :func:`exit_code_for`.
"""

from __future__ import annotations

import signal

__all__ = [
    "EXIT_CONFIG",
    "EXIT_LAUNCH",
    "EXIT_PIPE",
    "PROG",
    "ConfigError",
    "EntrypointError",
    "Interrupted",
    "LaunchError",
    "RankTableError",
    "WaitTimeout",
    "exit_code_for",
    "shorten",
]

#: The shim's name: its messages' prefix, and the name of a failure that is the shim's own (a refusal).
PROG = "ma-entrypoint"
EXIT_CONFIG = 2
EXIT_LAUNCH = 3
#: ``--dry-run``'s reader went away before the whole plan was written: 128 + SIGPIPE's number, what a shell reports
#: for a writer a closed pipe kills (the shim ignores SIGPIPE, as Python does, and says where the plan stopped).
EXIT_PIPE = 128 + 13
_SHOWN_CHARS = 80  # longer string values are cut to this many characters in messages


def shorten(value: object) -> object:
    """``value`` as a message shows it: a string longer than 80 characters is cut, with its length noted."""
    if isinstance(value, str) and len(value) > _SHOWN_CHARS:
        return f"{value[:_SHOWN_CHARS - 20]}... ({len(value)} characters)"
    return value


class EntrypointError(Exception):
    """Base class: carries a one-line, user-facing message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(EntrypointError):
    """An input is invalid. Names the variable (or argument), its value and what is expected."""

    def __init__(self, variable: str, value: object, expected: str) -> None:
        self.variable = variable
        self.value = value
        self.expected = expected
        super().__init__(f"{variable}={shorten(value)!r} is invalid: {expected}")


class RankTableError(ConfigError):
    """A rank table that is malformed or does not fit this host. ``where`` is a JSON path inside it."""

    def __init__(self, path: str, where: str, value: object, expected: str) -> None:
        self.path = path
        self.where = where
        EntrypointError.__init__(self, f"rank table {shorten(path)}: {where}={value!r} is invalid: {expected}")
        self.variable = "RANK_TABLE_FILE"
        self.value = value
        self.expected = expected


class LaunchError(EntrypointError):
    """The launch could not proceed (a program is missing, a directory cannot be written, ...)."""


class WaitTimeout(LaunchError):
    """A bounded wait ran out; ``waited`` is in seconds."""

    def __init__(self, what: str, waited: float, hint: str) -> None:
        self.what = what
        self.waited = waited
        self.hint = hint
        shown = f"{waited:.1f}" if waited < 10 else f"{waited:.0f}"
        super().__init__(f"gave up waiting for {what} after {shown}s: {hint}")


class Interrupted(EntrypointError):
    """The shim got signal ``signum`` while it waited (for the rank table, the master's name) before starting."""

    def __init__(self, signum: int, during: str) -> None:
        self.signum = signum
        self.during = during
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        super().__init__(f"stopped by {name} while {during}; nothing was started")


def exit_code_for(error: EntrypointError) -> int:
    """The shim's exit code for an error it raised itself."""
    if isinstance(error, Interrupted):
        return 128 + error.signum
    if isinstance(error, ConfigError):
        return EXIT_CONFIG
    return EXIT_LAUNCH
