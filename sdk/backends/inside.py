"""What ``usage`` and ``exec`` return on every backend: :class:`UsageReport` (one :class:`HostUsage` per host) and
:class:`ExecResult`. (Events: :mod:`.events`.)

- Usage is a snapshot per host: CPU (cores in use, or percent where the platform reports percent), memory
  (bytes, or percent), accelerator figures by the platform's own names (``gpuUtil``, ``npuMemUsage``, ...)
  and the number of processes where known. Anything the platform does not report is ``None``, never 0.
- An exec's result is its exit code and, when it was captured, its output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Tuple

if TYPE_CHECKING:
    from malaunch.entrypoint.public import RankProgress

__all__ = ["ExecResult", "HostUsage", "UsageReport"]


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
