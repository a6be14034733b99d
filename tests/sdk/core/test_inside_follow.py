"""Following a job prints why it waits when the reason changes, not on every poll; ``handle.events(follow=True)``
yields each event once until the job ends. A scripted backend (the one of ``test_follow``) stands in."""

from __future__ import annotations

from typing import List

from malaunch.sdk import JobEvent, JobState
from malaunch.sdk.backends.events import follow_events, merge_events
from malaunch.sdk.follow import follow_job
from malaunch.sdk.status import HostState
from test_follow import FakeClock, ScriptedBackend, host, job


def test_following_prints_the_pending_reason_when_it_changes() -> None:
    waiting = job(JobState.PENDING)._replace(pending_reason="PodGroup j is unschedulable: 0/3 nodes")
    other = waiting._replace(pending_reason="queue q is closed: it takes no new jobs")
    done = job(JobState.SUCCEEDED, host(0, HostState.EXITED, 0), code=0)
    backend = ScriptedBackend([waiting] * 20 + [other] * 20 + [done], [])
    texts = [e.text for e in follow_job(backend.handle("j"), heartbeat=1e9, poll=0.001, clock=FakeClock(0.01))]
    said = [t for t in texts if " waits: " in t]
    assert said == ["job j waits: PodGroup j is unschedulable: 0/3 nodes", "job j waits: queue q is closed: it takes "
                    "no new jobs"]  # fmt: skip


def test_follow_events_yields_each_event_once_in_order() -> None:
    first = JobEvent(1.0, "job", "Submitted", "a")
    second = JobEvent(2.0, "host 0", "Started", "b")
    third = JobEvent(3.0, "host 0", "Exited", "c")
    rounds: List[List[JobEvent]] = [[first], [first, second], [first, second, third]]
    ended = iter([False, False, True])
    got = list(follow_events(lambda: rounds.pop(0), lambda: next(ended), poll=0.0, sleep=lambda _: None))
    assert got == [first, second, third]
    assert merge_events([third, first], [second, first]) == [first, second, third]
