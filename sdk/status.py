"""Job and host states as every backend reports them: :class:`JobState`, :class:`JobStatus`, :class:`HostStatus`.

States form a closed set; a backend maps its native states onto it and keeps the native word in
``JobStatus.raw_state``. ``UNKNOWN`` is used for states nobody mapped yet, never a ``KeyError``.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Tuple

if TYPE_CHECKING:
    from malaunch.entrypoint.public import RankProgress, Recovery

__all__ = ["HostState", "HostStatus", "JobState", "JobStatus", "describe_end", "exit_code_of"]


class JobState(str, enum.Enum):
    """Life cycle of a job: PENDING -> RUNNING -> SUCCEEDED | FAILED | STOPPED."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"
    UNKNOWN = "UNKNOWN"

    @property
    def is_terminal(self) -> bool:
        """True once the job can no longer change."""
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.STOPPED)

    @classmethod
    def parse(cls, raw: object) -> JobState:
        """The state named ``raw``, or ``UNKNOWN``."""
        try:
            return cls(str(raw).upper())
        except ValueError:
            return cls.UNKNOWN


class HostState(str, enum.Enum):
    """One (emulated) host: PENDING -> RUNNING -> EXITED (``exit_code`` tells success) or KILLED."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    EXITED = "EXITED"
    UNKNOWN = "UNKNOWN"

    @classmethod
    def parse(cls, raw: object) -> HostState:
        """The state named ``raw``, or ``UNKNOWN``."""
        try:
            return cls(str(raw).upper())
        except ValueError:
            return cls.UNKNOWN


@dataclasses.dataclass(frozen=True, slots=True)
class HostStatus:
    """Where one host of the job is; ``exit_code`` is its shim's exit code once it has ended. An immutable record
    (a frozen dataclass), equal to an equal host status only: a changed copy is
    ``status._replace(field=value)``."""

    index: int
    address: str
    state: HostState
    pid: Optional[int] = None
    exit_code: Optional[int] = None
    started_at: Optional[float] = None
    ended_at: Optional[float] = None
    log_file: Optional[str] = None
    detail: str = ""  # e.g. the root-cause rank the host's shim reported

    def _replace(self, **changes: Any) -> HostStatus:
        """A copy with ``changes`` (field=value)."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready data."""
        return {
            "detail": self.detail,
            "index": self.index,
            "address": self.address,
            "state": self.state.value,
            "pid": self.pid,
            "exit_code": self.exit_code,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "log_file": self.log_file,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class JobStatus:
    """A snapshot of a job. ``exit_code`` is set once the job is terminal (0 for SUCCEEDED). An immutable record
    (a frozen dataclass), equal to an equal job status only: a changed copy is
    ``status._replace(field=value)``."""

    id: str
    backend: str
    state: JobState
    exit_code: Optional[int] = None
    message: str = ""
    raw_state: str = ""
    name: str = ""
    created_at: Optional[float] = None
    started_at: Optional[float] = None
    ended_at: Optional[float] = None
    hosts: Tuple[HostStatus, ...] = ()
    location: str = ""  # where the job lives: a job directory, a console URL
    # A failed job's class (malaunch.sdk.failures): {"class", "retryable", "reason", "description"}
    failure_class: Optional[Mapping[str, Any]] = None
    # Why the job (or one of its hosts) still waits, in one line, from what the platform reports; "" otherwise.
    pending_reason: str = ""
    # How many times the platform restarted the whole job (Volcano's retryCount, ModelArts' running records);
    # None when the backend's API does not tell.
    platform_restarts: Optional[int] = None
    # Each rank's last progress() record (every host's), as the shim keeps them; empty where the backend cannot
    # see them (the local backend can; a cloud backend's status shows what the platform's API says).
    progress: Tuple[RankProgress, ...] = ()
    # The time to recover after each failed attempt, as the job's host 0 recorded it (same backends).
    recovery: Tuple[Recovery, ...] = ()

    def _replace(self, **changes: Any) -> JobStatus:
        """A copy with ``changes`` (field=value)."""
        return dataclasses.replace(self, **changes)

    @property
    def is_terminal(self) -> bool:
        """True once the job has ended."""
        return self.state.is_terminal

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready data; ``id`` and ``state`` are what scripts rely on."""
        return {
            "id": self.id,
            "state": self.state.value,
            "exit_code": self.exit_code,
            "message": self.message,
            "backend": self.backend,
            "name": self.name,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "location": self.location,
            "hosts": [host.to_json() for host in self.hosts],
            "failure_class": dict(self.failure_class) if self.failure_class is not None else None,
            "pending_reason": self.pending_reason,
            "platform_restarts": self.platform_restarts,
            "progress": _progress_json(self.progress),
            "recovery": [record.to_json() for record in self.recovery],
        }


def _progress_json(records: Tuple[RankProgress, ...]) -> Optional[Dict[str, Any]]:
    """The job's progress (the newest attempt's ranks) and each rank's record; None when no rank reported any."""
    if not records:
        return None
    from malaunch.entrypoint.public import summarize

    summary = summarize(records)
    ranks = [{"rank": item.rank, "host": item.host, "step": item.step, "total": item.total, "time": item.time,
              "attempt": item.attempt, "rate": None if item.rate is None else round(item.rate, 4)}
             for item in records]  # fmt: skip
    return {**(summary.to_json() if summary is not None else {}), "per_rank": ranks}


def exit_code_of(status: JobStatus) -> int:
    """The process exit code that stands for a finished job: its own code, 0 for success, else 1."""
    if status.state is JobState.SUCCEEDED:
        return 0
    if status.exit_code is not None and status.exit_code != 0:
        return status.exit_code
    return 1


def describe_end(status: JobStatus) -> str:
    """One line for the end of a job."""
    took = ""
    if status.started_at is not None and status.ended_at is not None:
        took = f" after {status.ended_at - status.started_at:.1f}s"
    text = f"job {status.id} {status.state.value}{took}, exit code {status.exit_code}"
    if status.message:
        text += f": {status.message}"
    return text
