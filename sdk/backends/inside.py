"""What ``events``, ``usage`` and ``exec`` return on every backend: :class:`JobEvent`, :class:`UsageReport` (one
:class:`HostUsage` per host) and :class:`ExecResult`, plus the helpers every backend shares.

- Events are the platform's own records of a job (ModelArts training-job events, Kubernetes events of the Job,
  its PodGroup and pods, the local runner's host starts and exits and the shim's root-cause line), each with
  the time it happened, merged by time (:func:`merge_events`). :func:`follow_events` polls a backend's
  ``events`` and yields each event once until the job has ended.
- Usage is a snapshot per host: CPU (cores in use, or percent where the platform reports percent), memory
  (bytes, or percent), accelerator figures by the platform's own names (``gpuUtil``, ``npuMemUsage``, ...)
  and the number of processes where known. Anything the platform does not report is ``None``, never 0.
- An exec's result is its exit code and, when it was captured, its output.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Set, Tuple

if TYPE_CHECKING:
    from malaunch.entrypoint.public import RankProgress

__all__ = ["LEVELS", "ExecResult", "HostUsage", "JobEvent", "UsageReport", "follow_events", "merge_events"]

#: Event levels, as ModelArts names them (Kubernetes ``Normal`` is ``Info``).
LEVELS = ("Info", "Warning", "Error")


@dataclass(frozen=True)
class JobEvent:
    """One thing that happened to a job: when (seconds since the epoch), what (``reason``), to what (``source``:
    ``job``, ``podgroup/x``, ``pod/x-worker-1``, ``host 1``, ...), the platform's message, and its level."""

    time: float
    source: str
    reason: str
    message: str
    level: str = "Info"
    host: Optional[int] = None

    @property
    def key(self) -> Tuple[float, str, str, str]:
        """What makes two reports of an event the same event (for following)."""
        return (self.time, self.source, self.reason, self.message)

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready data (``time`` as seconds since the epoch and as UTC text)."""
        return {
            "time": self.time,
            "time_text": _stamp(self.time),
            "source": self.source,
            "reason": self.reason,
            "message": self.message,
            "level": self.level,
            "host": self.host,
        }

    def render(self) -> str:
        """One line: ``2026-11-24T08:00:01Z  host 1  Exited  exit code 7 ...``."""
        level = "" if self.level == "Info" else f"{self.level.upper()}: "
        return f"{_stamp(self.time)}  {self.source:<22} {self.reason:<16} {level}{self.message}".rstrip()


def _stamp(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def merge_events(*groups: Iterable[JobEvent]) -> List[JobEvent]:
    """Every event of ``groups`` once, oldest first (a stable order for events of the same second)."""
    seen: Set[Tuple[float, str, str, str]] = set()
    out: List[JobEvent] = []
    for group in groups:
        for event in group:
            if event.key not in seen:
                seen.add(event.key)
                out.append(event)
    return sorted(out, key=lambda event: event.time)


def follow_events(
    fetch: Callable[[], List[JobEvent]],
    ended: Callable[[], bool],
    *,
    poll: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[JobEvent]:
    """Each event ``fetch()`` reports, once, in time order, until ``ended()`` and one last fetch after it."""
    seen: Set[Tuple[float, str, str, str]] = set()
    while True:
        done = ended()
        for event in fetch():
            if event.key not in seen:
                seen.add(event.key)
                yield event
        if done:
            return
        sleep(poll)


@dataclass(frozen=True)
class HostUsage:
    """What one host uses right now (see the module docstring; ``None``: not reported)."""

    host: int
    name: str  # its address, pod or task
    cpu_cores: Optional[float] = None
    cpu_percent: Optional[float] = None
    memory_bytes: Optional[int] = None
    memory_percent: Optional[float] = None
    accelerators: Mapping[str, float] = field(default_factory=dict)
    processes: Optional[int] = None
    note: str = ""

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready data."""
        return {
            "host": self.host,
            "name": self.name,
            "cpu_cores": self.cpu_cores,
            "cpu_percent": self.cpu_percent,
            "memory_bytes": self.memory_bytes,
            "memory_percent": self.memory_percent,
            "accelerators": dict(self.accelerators),
            "processes": self.processes,
            "note": self.note,
        }


@dataclass(frozen=True)
class UsageReport:
    """A job's usage: one row per running host, and a note when the platform reports nothing (why)."""

    job_id: str
    hosts: Tuple[HostUsage, ...]
    note: str = ""
    source: str = ""  # where the figures come from: "/proc", "metrics.k8s.io", "ModelArts metrics API"
    ranks: Tuple[RankProgress, ...] = ()  # each rank's last progress() record of the newest attempt (local)

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready data."""
        return {
            "id": self.job_id,
            "source": self.source,
            "note": self.note,
            "hosts": [host.to_json() for host in self.hosts],
            "ranks": [{"rank": item.rank, "host": item.host, "step": item.step, "total": item.total,
                       "attempt": item.attempt, "time": item.time,
                       "rate": None if item.rate is None else round(item.rate, 4)} for item in self.ranks],
        }


@dataclass(frozen=True)
class ExecResult:
    """A command's end inside a host: its exit code, and its output when it was captured."""

    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""
