"""The local backend (default): runs every emulated host of a job on this machine, through the real shim.

Example::

    from malaunch.sdk.backends.local.backend import LocalBackend
    backend = LocalBackend(home="/tmp/ma")              # default: $MALAUNCH_HOME, else ~/.malaunch
    handle = backend.submit(spec)                       # plan (pure) + execute
    handle.wait(); print(handle.status().exit_code)

``execute`` prepares ``<home>/jobs/<job id>/`` (code snapshot, rank table, ``plan.json``, ``state.json``) and
starts the detached job runner (:mod:`malaunch.sdk.backends.local.runner`); every other call reads the job
directory only, so it works from any process. Hosts get loopback addresses, or network namespaces when
msrun spans several hosts (see :mod:`malaunch.sdk.backends.local.hostnet`).

The class is the ``Backend`` interface and nothing more; three collaborators do the work:

- :class:`~.submit.Submitter`: plan, this machine's checks, execute (imported only when a job is planned);
- :class:`~.query.JobReader`: finding a job and reading it (status, logs, events, usage, exec, the list);
- :class:`~.housekeeping.Housekeeper`: stop, delete, losing and restoring a host, ``keep_for`` and prune.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import TYPE_CHECKING, AbstractSet, Any, Iterator, List, Mapping, Optional, Sequence, Tuple

from ...errors import ConfigError
from ...home import home_dir
from ..base import Backend, JobHandle, Pace
from .hostnet import LOOPBACK, NETNS
from .housekeeping import Housekeeper
from .query import JobReader
from .setup import LocalSetup

if TYPE_CHECKING:
    from ...plan import SubmitPlan
    from ...spec.model import JobSpec
    from ...spec.resume import ResumeRef
    from ...status import JobStatus
    from ..base import PruneResult
    from ..checkpoints import CheckpointListing
    from ..events import JobEvent
    from ..inside import ExecResult, UsageReport
    from ..listing import ListPage, ListQuery
    from .hostnet import HostNetwork
    from .submit import Submitter

__all__ = ["NETWORK_MODES", "LocalBackend", "LocalJobHandle", "create_backend"]

NETWORK_MODES = ("auto", LOOPBACK, NETNS)


class LocalBackend(Backend):
    """Emulates a ModelArts job on this machine: one detached runner, one shim per emulated host."""

    name = "local"
    home: str

    def __init__(
        self,
        home: Optional[str] = None,
        *,
        python: str = sys.executable,
        network: str = "auto",
        environ: Optional[Mapping[str, str]] = None,
        capacity: Optional[str] = None,
    ) -> None:
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.capacity_setting = capacity  # local.capacity of the profile (MALAUNCH_LOCAL_CAPACITY beats it)
        self.home = home_dir(self.environ, home)
        self.python = python
        if network not in NETWORK_MODES:
            raise ConfigError("unknown local network mode", network, f"use one of: {', '.join(NETWORK_MODES)}")
        self.network_mode = network
        self._setup = LocalSetup(self.home, self.environ, python, network, capacity, {})
        self._jobs = JobReader(self._setup, self.name)
        self._keeper = Housekeeper(self._jobs)
        self._submitter: Optional[Submitter] = None

    @property
    def _submit(self) -> Submitter:
        """The submitter, made on first use (a verb that only reads jobs never loads it)."""
        if self._submitter is None:
            from .submit import Submitter

            self._submitter = Submitter(self._setup, self.name)
        return self._submitter

    # -- submitting (:mod:`.submit`) -----------------------------------------------------------------------
    def network_for(self, spec: JobSpec, job_id: str) -> HostNetwork:
        """The host network a job gets: netns for msrun across hosts (or when asked), else loopback."""
        return self._submit.network_for(spec, job_id)

    def plan(self, spec: JobSpec, *, job_id: str, now: float) -> SubmitPlan:
        return self._submit.plan(spec, job_id=job_id, now=now)

    def check(self, plan: SubmitPlan) -> Tuple[str, ...]:
        """What ``execute`` checks on this machine before it starts anything (also run by ``--dry-run``): a note
        with the code snapshot's size, and a warning when it is big."""
        return self._submit.check(plan)

    def execute(self, plan: SubmitPlan) -> JobHandle:
        self._submit.execute(plan)
        with contextlib.suppress(OSError):  # keep_for of earlier jobs: never a reason for this submit to fail
            self.expire(time.time())
        return self.handle(plan.job_id)

    def handle(self, job_id: str) -> LocalJobHandle:
        """A handle for an existing job whose ``wait`` wakes when the job's state file changes."""
        return LocalJobHandle(self, job_id)

    # -- reading jobs (:mod:`.query`) ------------------------------------------------------------------------
    def resolve_id(self, job_id: str) -> str:
        """``job_id`` itself, or the one job whose id starts with it."""
        return self._jobs.resolve_id(job_id)

    def status(self, job_id: str) -> JobStatus:
        return self._jobs.status(job_id)

    def logs(self, job_id: str, *, follow: bool = False) -> Iterator[str]:
        return self._jobs.logs(job_id, follow=follow)

    def list(self) -> List[JobStatus]:
        """Every job, newest first, from the history index as ``ma-submit list`` reads it (:meth:`list_page`): an
        ended job with a row is not read again. Nothing is removed (``keep_for`` is applied by the commands)."""
        return self._jobs.list()

    def list_page(self, query: ListQuery, *, now: float) -> ListPage:
        """From the history index (:mod:`.history`): only jobs without a row are read; ``keep_for`` applied."""
        return self._jobs.list_page(query, now=now)

    def events(self, job_id: str) -> List[JobEvent]:
        return self._jobs.events(job_id)

    def follow_events(self, job_id: str, *, poll: float = 2.0) -> Iterator[JobEvent]:
        """:meth:`JobHandle.events` of the job ``job_id`` followed (:meth:`.query.JobReader.follow_events`)."""
        return self._jobs.follow_events(job_id, poll=poll)

    def usage(self, job_id: str) -> UsageReport:
        return self._jobs.usage(job_id)

    def exec(
        self, job_id: str, command: Sequence[str], *, host: int = 0, tty: bool = False, capture: bool = True,
        stdin: Optional[bytes] = None,
    ) -> ExecResult:  # fmt: skip
        """In the host's namespace, folder and variables; ``tty``: on a terminal of its own (a pseudo-terminal)."""
        return self._jobs.exec(job_id, command, host=host, tty=tty, capture=capture, stdin=stdin)

    # -- looking after jobs (:mod:`.housekeeping`) -------------------------------------------------------------
    def stop(self, job_id: str) -> JobStatus:
        return self._keeper.stop(job_id)

    def delete(self, job_id: str) -> str:
        return self._keeper.delete(job_id)

    def lose_host(self, job_id: str, host: int) -> JobStatus:
        """Play the platform losing host ``host``'s machine for good: its shim and everything under it are killed
        and it is not started again; an elastic job goes on without it (:mod:`.hostops`). Returns once done."""
        return self._keeper.lose_host(job_id, host)

    def restore_host(self, job_id: str, host: int) -> JobStatus:
        """Play the platform giving lost host ``host`` a machine again: its shim starts and joins the job."""
        return self._keeper.restore_host(job_id, host)

    # -- checkpoints (:mod:`.checkpoints`) ---------------------------------------------------------------------
    def checkpoints(self, job_id: str) -> CheckpointListing:
        """The job's checkpoint folder, read as its shim reads it."""
        return self._jobs.checkpoints(job_id)

    def resume_check(self, ref: ResumeRef, spec: JobSpec) -> ResumeRef:
        """``ref`` with the whole id of the ended local job it names, its checkpoint proven complete."""
        return self._jobs.resume_check(ref)

    def expire(self, now: float) -> List[str]:
        """Remove the ended jobs whose ``keep_for`` has passed (skipped while a prune runs); returns their ids."""
        return self._keeper.expire(now)

    def prune(
        self,
        older_than: float,
        *,
        now: Optional[float] = None,
        states: AbstractSet[str] = frozenset(),
        keep: int = 0,
        dry_run: bool = False,
    ) -> PruneResult:
        """As :meth:`Backend.prune`, from the history index, holding the home's prune lock (:mod:`.retention`)."""
        return self._keeper.prune(older_than, now=now, states=states, keep=keep, dry_run=dry_run)


class LocalJobHandle(JobHandle):
    """A local job's handle: ``wait`` returns once the job's state file says it ended, and ``events(follow=True)``
    gives each new event, woken by the change of the file that records it, not at the next tick of a poll (the
    poll stays, for what no file records: a runner gone before the end)."""

    backend: LocalBackend

    def __init__(self, backend: LocalBackend, job_id: str) -> None:
        super().__init__(backend, job_id)
        self.backend = backend

    def _wait(self, timeout: Optional[float], pace: Pace) -> JobStatus:
        """As :meth:`JobHandle.wait`; a damaged state file that no runner will write again ends it at once
        (:meth:`.query.JobReader.wait`: the backend's own reader of its jobs)."""
        return self.backend._jobs.wait(self.id, timeout, pace)

    def events(self, follow: bool = False, *, poll: float = 2.0) -> Iterator[JobEvent]:
        """As :meth:`JobHandle.events`; followed, new events and the end are read as soon as a file they come from
        changes (at least every ``poll`` seconds)."""
        if not follow:
            return super().events()
        return self.backend.follow_events(self.id, poll=poll)


def create_backend(**options: Any) -> LocalBackend:
    """Registry factory: ``get_backend("local", home=..., network=...)``."""
    return LocalBackend(**options)
