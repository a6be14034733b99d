"""Exception tree of the SDK and of ``ma-submit``; the CLI maps it to exit codes in one place.

::

    MalaunchError                    any failure the SDK reports itself (the CLI prints one line, no traceback)
    ├── ConfigError                  an input is invalid: a job file, an option, a setting        exit 2
    │   ├── SpecError                a job spec field is invalid; ``field`` is its path         exit 2
    │   ├── BackendNotAvailable      a known backend whose module is not installed              exit 2
    │   └── JobNotRunning            top/exec on a job that has not started or has ended        exit 2
    ├── BackendError                 the backend could not do what was asked (I/O, processes)   exit 3
    │   ├── JobStateUnknown          the job's state cannot be read (damaged); waiting stops    exit 3
    │   └── ExecElsewhere            no exec API: ``command`` (e.g. ssh) runs it instead        exit 3
    ├── JobNotFound                  no job with that id on that backend                        exit 4
    │   └── SweepNotFound            no sweep with that id under MALAUNCH_HOME                  exit 4
    └── WaitTimeout                  ``wait(timeout=...)`` ran out before the job ended         exit 124

Every message says what failed, the offending value, and what to do, e.g.
``resources.hosts: must be >= 1, got 0; fix the job file``. Exit codes are decided only in
:func:`exit_code_for`; a followed job's own exit code is passed through by the CLI separately.
"""

from __future__ import annotations

import shlex
from typing import Optional, Sequence

__all__ = [
    "EXIT_BACKEND",
    "EXIT_CONFIG",
    "EXIT_NOT_FOUND",
    "EXIT_TIMEOUT",
    "BackendError",
    "BackendNotAvailable",
    "ConfigError",
    "ExecElsewhere",
    "JobNotFound",
    "JobNotRunning",
    "JobStateUnknown",
    "MalaunchError",
    "SpecError",
    "SweepNotFound",
    "WaitTimeout",
    "exit_code_for",
    "show_value",
]

EXIT_CONFIG = 2
EXIT_BACKEND = 3
EXIT_NOT_FOUND = 4
EXIT_TIMEOUT = 124

_MAX_SHOWN = 80


def show_value(value: object) -> str:
    """A short, single-line ``repr`` of an offending value for error messages: a long one keeps its start and its
    end (a path's file name, a list's last item), with ``...`` between."""
    text = repr(value)
    text = text.replace("\n", "\\n")
    if len(text) > _MAX_SHOWN:
        head = (_MAX_SHOWN - 3) // 2
        text = text[:head] + "..." + text[-(_MAX_SHOWN - 3 - head) :]
    return text


def _got(value: object) -> str:
    """``, got <value>``; nothing for a value that is missing, and words for an empty text (never ``got ''``)."""
    if value is None:
        return ""
    if isinstance(value, str) and not value.strip():
        return ", got an empty value" if not value else f", got only blanks ({show_value(value)})"
    return f", got {show_value(value)}"


class MalaunchError(Exception):
    """Base class: a one-line, user-facing message in ``message``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(MalaunchError):
    """An input is invalid: ``what`` failed, ``value`` is the culprit, ``hint`` says what to do."""

    def __init__(self, what: str, value: object, hint: str) -> None:
        self.what = what
        self.value = value
        self.hint = hint
        super().__init__(f"{what}{_got(value)}; {hint}")


class SpecError(ConfigError):
    """A job spec field is invalid. ``field`` is a path such as ``resources.hosts`` or ``inputs[0].name``.

    ``source`` (the job file) is prefixed to the message when known.
    """

    def __init__(
        self,
        field: str,
        problem: str,
        value: object,
        hint: str = "fix the job file",
        source: Optional[str] = None,
    ) -> None:
        self.field = field
        self.problem = problem
        self.source = source
        where = f"{source}: {field}" if source else field
        super().__init__(f"{where}: {problem}", value, hint)

    def with_source(self, source: str) -> SpecError:
        """The same error, naming the job file it came from."""
        if self.source is not None:
            return self
        return SpecError(self.field, self.problem, self.value, self.hint, source=source)


class BackendNotAvailable(ConfigError):
    """A known backend name whose module is not installed."""

    def __init__(self, name: str, available: str) -> None:
        self.name = name
        super().__init__(
            f"backend {name!r} is not installed", name, f"install malaunch[{name}] or use one of: {available}"
        )


class JobNotRunning(ConfigError):
    """``top``/``exec`` asked of a job with nothing running: it is still waiting, or it has ended."""

    def __init__(self, job_id: str, state: str, hint: str) -> None:
        self.job_id = job_id
        self.state = state
        self.what, self.value, self.hint = f"job {job_id} is {state}", state, hint
        MalaunchError.__init__(self, f"job {job_id} is {state}, nothing of it runs; {hint}")


class BackendError(MalaunchError):
    """The backend failed to act (could not write the job directory, start a process, ...)."""


class ExecElsewhere(BackendError):
    """The platform has no exec API; ``command`` (an argv, e.g. ``ssh ...``) opens a shell in the host instead."""

    def __init__(self, job_id: str, command: Sequence[str], note: str) -> None:
        self.job_id = job_id
        self.command = tuple(command)
        self.note = note
        super().__init__(f"job {job_id}: {note}; run: {shlex.join(self.command)}")


class JobStateUnknown(BackendError):
    """The job's state stayed UNKNOWN (e.g. a damaged state file), so waiting for its end cannot go on."""

    def __init__(self, job_id: str, reason: str) -> None:
        self.job_id = job_id
        self.reason = reason
        super().__init__(
            f"job {job_id}: its state is unknown, stopped waiting: {reason or 'no reason given'}; "
            f"see 'ma-submit status {job_id}'"
        )


class JobNotFound(MalaunchError):
    """No job ``job_id`` on ``backend``."""

    def __init__(self, job_id: str, backend: str, hint: str) -> None:
        self.job_id = job_id
        self.backend = backend
        super().__init__(f"no job with id {job_id!r} on backend {backend!r}; {hint}")


class SweepNotFound(JobNotFound):
    """No sweep ``sweep_id`` under the sweeps' home (``close``: an id of one there, for a did-you-mean)."""

    def __init__(self, sweep_id: str, home: str, close: Optional[str] = None) -> None:
        mean = f"did you mean {close!r}? or " if close else ""
        MalaunchError.__init__(
            self,
            f"no sweep with id {sweep_id!r} under {home}; {mean}see 'ma-submit sweep list' (MALAUNCH_HOME={home})",
        )
        self.job_id = sweep_id
        self.backend = "sweep"


class WaitTimeout(MalaunchError):
    """A wait ran out of time; the job (or the sweep, ``kind="sweep"``) keeps running."""

    def __init__(self, job_id: str, timeout: float, state: str, kind: str = "job") -> None:
        self.job_id = job_id
        self.timeout = timeout
        self.state = state
        verb = "sweep stop" if kind == "sweep" else "stop"
        super().__init__(
            f"{kind} {job_id} did not end within {timeout:g}s, it is {state}; wait longer or stop it with "
            f"'ma-submit {verb} {job_id}'"
        )


def exit_code_for(error: MalaunchError) -> int:
    """The CLI's exit code for an error the SDK raised."""
    if isinstance(error, ConfigError):
        return EXIT_CONFIG
    if isinstance(error, JobNotFound):
        return EXIT_NOT_FOUND
    if isinstance(error, WaitTimeout):
        return EXIT_TIMEOUT
    return EXIT_BACKEND
