"""What ``events`` returns on every backend: :class:`JobEvent`, and the helpers every backend shares.

Events are the platform's own records of a job (ModelArts training-job events, Kubernetes events of the Job, its
PodGroup and pods, the local runner's host starts and exits and the shim's root-cause line), each with the time it
happened, merged by time (:func:`merge_events`). :func:`follow_events` polls a backend's ``events`` and yields each
event once until the job has ended. (What a job's hosts use and a command's end inside one: :mod:`.inside`, which
``ma-submit events`` does not load.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

__all__ = ["LEVELS", "JobEvent", "follow_events", "merge_events"]

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
