"""A job's attempts, made from what every backend reports: its status and its events (``Backend.events``).

An attempt ends where the events say the job was restarted (the local shims' ``Restarted``, one per host and
attempt, its message naming the attempt, its exit code, its class and its root cause; a platform's restart
events, one per restart). The last attempt ends with the job (still open while it runs) and its cause is the
job's root cause (the ``RootCause`` event, else the status's message). Hosts lost and back, changes of an elastic
job's hosts and hangs are markers on the way. The time to recover after each failed attempt comes from the
status's recovery records (``JobStatus.recovery``: failure seen, last rank gone, next attempt started, its first
progress), said in the record's own words (:func:`~malaunch.entrypoint.public.recovery_lines`). Pure: the clock
is an argument.
"""

from __future__ import annotations

import re
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from malaunch.entrypoint.public import Recovery, recovery_lines

from ..backends.events import JobEvent
from ..status import JobState, JobStatus

__all__ = ["Attempt", "Marker", "Recovered", "Timeline", "recovered_of", "restarts_in", "timeline_of"]

_ATTEMPT = re.compile(r"\battempt (\d+) (?:of the job )?ended\b")  # a host's own, or the job's restart
_ANNOUNCED = re.compile(r"\Aattempt (\d+) is\b")
_MARKS = {"HostLost": "lost", "HostBack": "back", "HostsChanged": "hosts"}


class Attempt(NamedTuple):
    """One attempt: its number, start, end (None: still running), how it ended and why."""

    number: int
    start: float
    end: Optional[float]
    outcome: str  # restarted, succeeded, failed, stopped, running, pending, unknown
    cause: str
    hang: bool = False

    def duration(self, now: float) -> float:
        """Seconds it ran (so far)."""
        return max((now if self.end is None else self.end) - self.start, 0.0)


class Marker(NamedTuple):
    """Something that happened on the way: a host lost or back, a change of hosts, a hang."""

    time: float
    kind: str  # lost, back, hosts, hang
    label: str


class Recovered(NamedTuple):
    """The time to recover after attempt ``attempt`` failed: from the failure seen (``start``) to the next attempt's
    first progress (``end``; None: not yet, or never when ``ended``), the phases between, and the record in words
    (``never``: why no first progress will come, when ``ended``)."""

    attempt: int
    start: float
    end: Optional[float]
    phases: Tuple[Tuple[str, float], ...]  # (label, time) of the phases between that happened
    ended: bool
    line: str
    never: str = "the job ended"

    def seconds(self, now: float) -> float:
        """Seconds from the failure seen to the first progress (so far, while it has not come)."""
        return max((now if self.end is None else self.end) - self.start, 0.0)

    def summary(self, now: float) -> str:
        """A short label: ``recovered in 2.31 s``, ``recovering for 4.00 s`` or ``no recovery``."""
        if self.end is not None:
            return f"recovered in {self.seconds(now):.2f} s"
        return f"no recovery: {self.never}" if self.ended else f"recovering for {self.seconds(now):.2f} s"


class Timeline(NamedTuple):
    """The attempts in order, the markers, the recoveries, and the span they are drawn over."""

    start: float
    end: float
    attempts: Tuple[Attempt, ...]
    markers: Tuple[Marker, ...]
    recoveries: Tuple[Recovered, ...] = ()


def recovered_of(record: Recovery) -> Recovered:
    """One recovery record as the timeline draws it, its words those ``ma-submit status`` prints."""
    after = record.next_label
    phases = [(label, when) for label, when in (("last rank gone", record.last_rank_gone),
                                                (f"{after} started", record.next_started))
              if when is not None]  # fmt: skip
    line = f"recovery after {record.label}: " + "; ".join(recovery_lines(record, label=False))
    if not record.ended and record.first_progress is None and record.next_ended is not None:
        return Recovered(record.attempt, record.failure_seen, None, tuple(phases), True, line,
                         f"{after} ended without progress")  # fmt: skip
    return Recovered(record.attempt, record.failure_seen, record.first_progress, tuple(phases), record.ended, line)


def _is_hang(text: str) -> bool:
    return "(hang)" in text or text.startswith("hung") or " hung" in text


def restarts_in(events: Sequence[JobEvent]) -> List[Tuple[float, str]]:
    """(when, why) of each restart, oldest first: one per attempt number however many hosts reported it."""
    numbered: Dict[int, Tuple[float, str]] = {}
    plain: List[Tuple[float, str]] = []
    for event in events:
        if "restart" not in event.reason.lower():
            continue
        found = _ATTEMPT.search(event.message)
        if found is None:
            plain.append((event.time, event.message))
            continue
        number = int(found.group(1))
        known = numbered.get(number)
        # the host whose own rank was the root cause says so ("root cause rank N"); a peer's word never wins over it
        own = "root cause" in event.message and (known is None or "root cause" not in known[1])
        if known is None or event.time < known[0] or own:
            numbered[number] = (min(event.time, known[0]) if known else event.time, event.message)
    # a running job's attempt in progress (the local shims' "Attempt N is running"), before any report says why the
    # attempts before it ended
    reported = set(numbered)
    for event in events:
        found = _ANNOUNCED.search(event.message) if event.reason == "Attempt" else None
        for number in range(int(found.group(1)) if found else 0):
            if number not in reported and (number not in numbered or event.time < numbered[number][0]):
                numbered[number] = (event.time, f"attempt {number} ended; the job's report says why once it ends")
    return sorted([*numbered.values(), *plain])


def _last_outcome(status: JobStatus) -> str:
    return {
        JobState.SUCCEEDED: "succeeded", JobState.FAILED: "failed", JobState.STOPPED: "stopped",
        JobState.RUNNING: "running", JobState.PENDING: "pending",
    }.get(status.state, "unknown")  # fmt: skip


def _last_cause(status: JobStatus, events: Sequence[JobEvent]) -> str:
    causes = [event.message for event in events if event.reason == "RootCause"]
    if causes:
        return causes[-1]
    if status.state is JobState.FAILED:
        failure = status.failure_class or {}
        parts = [status.message, str(failure.get("description") or "")]
        return "; ".join(part for part in parts if part) or f"exit code {status.exit_code}"
    if status.state is JobState.STOPPED:
        return status.message or "stopped"
    return ""


def timeline_of(status: JobStatus, events: Sequence[JobEvent], now: float) -> Timeline:
    """The attempts of the job ``status`` describes, from its ``events`` (oldest first)."""
    times = [event.time for event in events]
    start = status.started_at or status.created_at or (min(times) if times else now)
    end = status.ended_at if status.is_terminal and status.ended_at is not None else now
    attempts: List[Attempt] = []
    at = start
    for number, (when, why) in enumerate(restarts_in(events)):
        attempts.append(Attempt(number, at, max(when, at), "restarted", why, _is_hang(why)))
        at = max(when, at)
    cause = _last_cause(status, events)
    last_end = end if status.is_terminal else None
    if status.state is not JobState.PENDING or attempts:
        attempts.append(Attempt(len(attempts), at, last_end, _last_outcome(status), cause, _is_hang(cause)))
    markers = [Marker(event.time, _MARKS[event.reason], f"{event.source}: {event.message}")
               for event in events if event.reason in _MARKS]  # fmt: skip
    markers += [Marker(event.time, "hang", f"{event.source}: {event.message}") for event in events
                if event.reason not in _MARKS and "hang" in event.reason.lower()]  # fmt: skip
    recoveries = tuple(recovered_of(record) for record in sorted(status.recovery, key=lambda one: one.attempt))
    span_end = max([end, *(m.time for m in markers), *(a.end or now for a in attempts),
                    *(r.end for r in recoveries if r.end is not None)])  # fmt: skip
    return Timeline(start, max(span_end, start + 1e-3), tuple(attempts), tuple(sorted(markers)), recoveries)
