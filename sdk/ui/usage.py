"""Usage over time: what ``ma-submit top`` reads (``Backend.usage``), sampled while someone looks at the job.

A backend reports a snapshot; the page plots a history. :class:`UsageWatch` keeps one sampler thread per job that
a page asked about within :data:`LINGER` seconds, sampling every :data:`EVERY` seconds into a ring of
:data:`KEEP` samples; with no page open nothing samples (the idle server does no work), and a job that ended, or
whose backend cannot report usage, stops its sampler with the reason kept for the page (it is asked again, at
most every EVERY seconds, while a page looks: a pending job starts).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable, Deque, Dict, List, NamedTuple, Optional, Tuple

from ..backends.inside import UsageReport
from ..errors import MalaunchError

__all__ = ["EVERY", "KEEP", "LINGER", "Sample", "UsageWatch"]

#: Seconds between two samples of one job.
EVERY = 2.0
#: Samples kept per job (20 minutes at EVERY).
KEEP = 600
#: Seconds a job is still sampled after a page last asked.
LINGER = 30.0

Key = Tuple[str, str]  # (backend, job id)


class Sample(NamedTuple):
    """One reading: when, and the report."""

    time: float
    report: UsageReport


class _Job:
    def __init__(self) -> None:
        self.samples: Deque[Sample] = deque(maxlen=KEEP)
        self.asked = time.monotonic()
        self.note = ""
        self.finished = -1e9  # when its last sampler ended (monotonic)
        self.thread: Optional[threading.Thread] = None


class UsageWatch:
    """Samplers of the jobs pages look at; ``read(key, usage)`` returns the samples so far and a note."""

    def __init__(self, every: float = EVERY, linger: float = LINGER) -> None:
        self.every = every
        self.linger = linger
        self._jobs: Dict[Key, _Job] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def read(self, key: Key, usage: Callable[[], UsageReport]) -> Tuple[List[Sample], str]:
        """The samples of ``key`` so far (oldest first) and why sampling stopped (empty while it goes on);
        starts its sampler when none runs."""
        with self._lock:
            job = self._jobs.setdefault(key, _Job())
            job.asked = time.monotonic()
            idle = job.thread is None or not job.thread.is_alive()
            if idle and job.asked - job.finished >= self.every:  # a job that was not running is asked again later
                job.thread = threading.Thread(target=self._run, args=(job, usage), daemon=True,
                                              name=f"usage {key[1]}")  # fmt: skip
                job.thread.start()
            return list(job.samples), job.note

    def _run(self, job: _Job, usage: Callable[[], UsageReport]) -> None:
        try:
            self._sample(job, usage)
        finally:
            job.finished = time.monotonic()

    def _sample(self, job: _Job, usage: Callable[[], UsageReport]) -> None:
        while not self._stop.is_set() and time.monotonic() - job.asked < self.linger:
            began = time.monotonic()
            try:
                report = usage()
            except MalaunchError as error:  # not running (yet, or any more), or no usage on this platform
                job.note = str(error)
                return
            job.note = ""
            job.samples.append(Sample(time.time(), report))
            if not report.hosts and report.note:
                job.note = report.note
                return
            self._stop.wait(max(self.every - (time.monotonic() - began), 0.05))

    def close(self) -> None:
        """Stop every sampler (they are daemon threads; this only makes them end sooner)."""
        self._stop.set()
