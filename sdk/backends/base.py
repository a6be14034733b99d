"""The backend interface (:class:`Backend`) and the handle a submitted job is driven through (:class:`JobHandle`).

A backend turns a :class:`~malaunch.sdk.spec.JobSpec` into a running job in two steps, so that ``--dry-run``
shows exactly what would be submitted:

1. ``plan(spec, job_id=..., now=...) -> SubmitPlan`` is **pure**: no I/O, no clock, no randomness. The job id
   and the current time are arguments; planning twice with the same inputs gives equal plans and never
   changes ``spec``.
2. ``execute(plan) -> JobHandle`` is the only step with side effects: it creates the job and returns as soon
   as the job is submitted (it does not wait for the job to run).

Management calls take only a job id and work from any process (another shell, after the submitter died):

3. ``status(job_id) -> JobStatus`` never blocks for long; an unknown id raises
   :class:`~malaunch.sdk.errors.JobNotFound`.
4. ``logs(job_id, follow=False)`` yields the job's output lines, each ending without a newline. With
   ``follow=True`` it keeps yielding new lines until the job has ended and its output is drained. Calling it
   twice gives two independent iterators.
5. ``stop(job_id) -> JobStatus`` is idempotent: stopping an ended job changes nothing and returns its status.
   It returns only when nothing of the job is left running.
6. ``list() -> list[JobStatus]`` lists the backend's jobs, newest first.

``submit(spec)`` is ``execute(plan(spec, job_id=new id, now=clock))``; the id and the clock reading are made
there, outside the pure plan.
"""

from __future__ import annotations

import abc
import re
import secrets
import time
from typing import Callable, ClassVar, Iterator, List, Optional

from ..errors import WaitTimeout
from ..plan import SubmitPlan
from ..spec import JobSpec
from ..status import JobStatus

__all__ = ["Backend", "JobHandle", "make_job_id"]

_UNSAFE = re.compile(r"[^a-z0-9-]+")


def make_job_id(name: str, now: float, token: str) -> str:
    """``<name>-<YYYYmmdd-HHMMSS>-<token>``: sortable by time, safe as a folder and host name.

    Pure: ``now`` (seconds since the epoch, UTC) and ``token`` (random hex) are inputs.
    """
    stem = _UNSAFE.sub("-", name.lower()).strip("-")[:40] or "job"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{stem}-{stamp}-{token}"


class Backend(abc.ABC):
    """Runs jobs somewhere. Subclasses implement the six abstract methods described in the module docstring."""

    #: The name used in job files (``backend: local``) and on the command line (``--backend local``).
    name: ClassVar[str] = ""

    @abc.abstractmethod
    def plan(self, spec: JobSpec, *, job_id: str, now: float) -> SubmitPlan:
        """Build the submit plan for ``spec``; pure (see the module docstring)."""

    @abc.abstractmethod
    def execute(self, plan: SubmitPlan) -> JobHandle:
        """Submit ``plan``; returns once the job exists (it may still be PENDING)."""

    @abc.abstractmethod
    def status(self, job_id: str) -> JobStatus:
        """The job's current status; raises ``JobNotFound`` for an unknown id."""

    @abc.abstractmethod
    def logs(self, job_id: str, *, follow: bool = False) -> Iterator[str]:
        """The job's output lines; with ``follow`` until the job ends."""

    @abc.abstractmethod
    def stop(self, job_id: str) -> JobStatus:
        """Stop the job (idempotent); returns when nothing of it is running."""

    @abc.abstractmethod
    def list(self) -> List[JobStatus]:
        """All jobs this backend knows, newest first."""

    def new_job_id(self, spec: JobSpec, now: float) -> str:
        """A fresh job id for ``spec`` (random token); override for backends that assign ids themselves."""
        return make_job_id(spec.name, now, secrets.token_hex(3))

    def submit(self, spec: JobSpec) -> JobHandle:
        """Plan and execute ``spec`` with a new id; the only place the clock and randomness are read."""
        now = time.time()
        return self.execute(self.plan(spec, job_id=self.new_job_id(spec, now), now=now))

    def handle(self, job_id: str) -> JobHandle:
        """A handle for an existing job (nothing is checked until you call it)."""
        return JobHandle(self, job_id)


class JobHandle:
    """A submitted job: ``status()``, ``wait()``, ``logs()``, ``stop()``; ``id`` is its job id.

    Handles are cheap and hold no resources: every call asks the backend again, so a handle made in another
    process (``Backend.handle(job_id)``) behaves the same as the one ``submit()`` returned.
    """

    def __init__(self, backend: Backend, job_id: str) -> None:
        self.backend = backend
        self.id = job_id

    def __repr__(self) -> str:
        return f"JobHandle(backend={self.backend.name!r}, id={self.id!r})"

    def status(self) -> JobStatus:
        """The job's current status."""
        return self.backend.status(self.id)

    def wait(
        self,
        timeout: Optional[float] = None,
        *,
        poll_interval: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> JobStatus:
        """Block until the job has ended and return its final status.

        Raises:
            WaitTimeout: ``timeout`` seconds passed first; the job keeps running.
        """
        deadline = None if timeout is None else clock() + timeout
        while True:
            status = self.status()
            if status.is_terminal:
                return status
            if deadline is not None:
                left = deadline - clock()
                if left <= 0:
                    raise WaitTimeout(self.id, float(timeout or 0), status.state.value)
                sleep(min(poll_interval, left))
            else:
                sleep(poll_interval)

    def logs(self, follow: bool = False) -> Iterator[str]:
        """The job's output lines (``[host N] ...``); with ``follow`` until the job ends."""
        return self.backend.logs(self.id, follow=follow)

    def stop(self) -> JobStatus:
        """Stop the job; idempotent; returns when nothing of it is left running."""
        return self.backend.stop(self.id)
