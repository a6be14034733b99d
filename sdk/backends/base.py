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

Optional, with defaults here:

7. ``check(plan)`` raises :class:`~malaunch.sdk.errors.SpecError` for what would make ``execute`` refuse the plan
   on this machine (by default: ``code_dir`` and ``boot_file`` must exist); ``--dry-run`` calls it too.
8. ``resolve_id(prefix)`` turns a unique prefix of a job id into the id (default: a whole id as given, else the
   one id of :meth:`list` it starts).
9. ``delete(job_id) -> str`` removes an ended job's records and returns its id; ``prune(older_than, states=...,
   keep=N, dry_run=...)`` deletes every ended job (of those states) that ended more than ``older_than`` seconds
   ago except the newest ``keep`` of them, built on ``list`` and ``delete``; with ``dry_run`` it deletes
   nothing and says what would go. The default ``delete`` raises :class:`~malaunch.sdk.errors.BackendError`
   (not supported).
   ``list_page(query, now=...)`` is what ``ma-submit list`` calls: the newest jobs matching a
   :class:`~malaunch.sdk.backends.listing.ListQuery`, cut to its limit, and how many more match; by default
   built on ``list`` (the local backend answers from its history index instead).

Sweeps (:mod:`malaunch.sdk.sweep`) submit many plans of one job through two more optional hooks:

10. ``label(plan, labels) -> SubmitPlan``: the plan with ``labels`` (the sweep id, the trial index) put where the
    platform keeps them (Volcano: the Job's labels); pure. Default: the plan unchanged.
11. ``share_code(plan, upload=...) -> SubmitPlan``: what every trial of a sweep shares (the code) is prepared
    once: with ``upload=True`` it is done now; either way the plan returned does not do it again. Default: the
    plan unchanged (the local backend snapshots the code per job; Volcano's code is in the image).

Seeing inside a job (results in :mod:`malaunch.sdk.backends.events` and :mod:`malaunch.sdk.backends.inside`;
defaults here raise :class:`~malaunch.sdk.errors.BackendError`, "not supported"):

12. ``events(job_id) -> list[JobEvent]``: the platform's own events of the job, oldest first. An ended job
    keeps its events (as long as the platform keeps them). An unknown id raises ``JobNotFound``; refused
    credentials a ``ConfigError``; a missing permission a ``BackendError`` naming it.
13. ``usage(job_id) -> UsageReport``: what each running host uses now. A job with nothing running (still
    pending, or ended) raises :class:`~malaunch.sdk.errors.JobNotRunning`; an unknown id ``JobNotFound``. A
    platform that serves no figures is not an error: the report has no hosts and a ``note`` saying why.
14. ``exec(job_id, command, *, host=0, tty=False, capture=True, stdin=None) -> ExecResult``: runs the argv
    ``command`` inside host ``host`` of a running job and passes its exit code through. ``capture=True``
    collects its output (``stdin`` bytes are its input); ``capture=False`` connects it to this process's own
    stdin/stdout/stderr (``tty``: a terminal, where the backend supports one). Not running:
    ``JobNotRunning``; no such host: ``ConfigError``; unknown id: ``JobNotFound``; a platform without an exec
    API raises :class:`~malaunch.sdk.errors.ExecElsewhere` with the command that gets there instead (ssh),
    or a ``ConfigError`` saying how to enable it. What ``exec`` starts is the job's: ``stop`` ends it too.
15. A PENDING job's ``JobStatus.pending_reason`` says why it waits, in one line, from what the platform
    reports (empty when nothing waits).
    ``status_with_progress(job_id) -> JobStatus`` is ``status`` with the job's progress and time to recover
    (``JobStatus.progress``, ``recovery``) where reading them costs more than a status: what ``ma-submit status``
    and ``top`` call, never ``wait``'s polling. Default: ``status`` (the local backend reads them in ``status``
    itself); a cloud backend reads the shims' progress and recovery lines in its hosts' log tails
    (:mod:`.logprogress`).

Checkpoints (issue 39; defaults here raise :class:`~malaunch.sdk.errors.ConfigError`, "not on this backend yet"):

16. ``checkpoints(job_id) -> CheckpointListing``: the job's checkpoint folder as the shim reads it (each
    checkpoint's step, time, size, and why one is not complete). An unknown id raises ``JobNotFound``.
17. ``resume_check(ref, spec) -> ResumeRef``: ``ref`` (``spec.resume_from``, parsed) with the job's whole id, once
    it is proven to name a checkpoint of an ended job that ``spec`` can reach (local: proven complete; Volcano: on
    the same volume; ModelArts: uploaded to OBS, its folder as ``ref.location``);
    the plan then gives it as ``MALAUNCH_RESUME_SOURCE``. A job still running, or no checkpoint to resume from,
    raises :class:`~malaunch.sdk.errors.SpecError` (field ``resume_from``) or ``ConfigError``, one line each.
    :meth:`Backend.submit`, ``Job.plan`` and a sweep's plan and submit call it (through
    :meth:`Backend.resolve_resume`) before the pure plan. A dry run (``Job.plan(dry=True)``, ``--dry-run``) asks
    no remote API: ``resume_unresolved(ref, spec)`` (default None: check as above) gives the ref it shows instead
    (ModelArts: the old job's OBS folder as ``{resolved-at-submit}``).

A status stuck in ``UNKNOWN`` (a damaged record) ends ``JobHandle.wait`` and following with
:class:`~malaunch.sdk.errors.JobStateUnknown` after :data:`UNKNOWN_PATIENCE` seconds instead of waiting forever.

``submit(spec)`` is ``execute(plan(spec, job_id=new id, now=clock))``; the id and the clock reading are made
there, outside the pure plan.
"""

from __future__ import annotations

import abc
import os
import re
import time
from typing import (
    TYPE_CHECKING,
    AbstractSet,
    Callable,
    ClassVar,
    Iterator,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    TextIO,
    Tuple,
)

from ..errors import BackendError, ConfigError, JobStateUnknown, SpecError, WaitTimeout
from ..home import one_by_prefix
from ..status import JobState, JobStatus

if TYPE_CHECKING:  # only in annotations: reading a job's state needs neither a spec nor what is inside a job

    from ..plan import SubmitPlan
    from ..spec.model import JobSpec
    from ..spec.resume import ResumeRef
    from .checkpoints import CheckpointListing
    from .events import JobEvent
    from .inside import ExecResult, UsageReport
    from .listing import ListPage, ListQuery  # nor listing's filters: only list_page needs them

__all__ = ["UNKNOWN_PATIENCE", "Backend", "JobHandle", "Pace", "PruneResult", "UnknownWatch", "check_boot_file",
           "check_code", "make_job_id"]

#: Seconds a job may stay UNKNOWN before waiting for it gives up.
UNKNOWN_PATIENCE = 2.0

_UNSAFE = re.compile(r"[^a-z0-9-]+")
#: The tail of a whole job id: the time stamp and the token of :func:`make_job_id`.
_WHOLE_ID = re.compile(r"-\d{8}-\d{6}-[0-9a-f]{6}\Z")


def make_job_id(name: str, now: float, token: str) -> str:
    """``<name>-<YYYYmmdd-HHMMSS>-<token>``: sortable by time, safe as a folder and host name.

    Pure: ``now`` (seconds since the epoch, UTC) and ``token`` (random hex) are inputs.
    """
    stem = _UNSAFE.sub("-", name.lower()).strip("-")[:40] or "job"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{stem}-{stamp}-{token}"


def check_code(spec: JobSpec) -> None:
    """``code_dir`` is an existing folder and ``boot_file`` a file in it (URLs are not checked here)."""
    if "://" in spec.code_dir:
        return
    if not os.path.isdir(spec.code_dir):
        what = "is a file, not a folder" if os.path.isfile(spec.code_dir) else "is not an existing folder"
        raise SpecError("code_dir", what, spec.code_dir, "give the folder with your code")
    check_boot_file(os.path.join(spec.code_dir, os.path.normpath(spec.boot_file)), spec.boot_file)


#: The boot files the shim starts with an interpreter (``python -u``, ``bash``); any other it executes itself.
_RUN_BY_INTERPRETER = (".py", ".sh")


def check_boot_file(boot: str, given: str) -> None:
    """``boot`` (the job's ``boot_file`` ``given``, joined to its code folder) is a regular file the shim can start
    (a .py, a .sh, or executable); else the one line that says what it is instead (a folder is called one, not "no
    such file")."""
    if os.path.isfile(boot):
        if not boot.endswith(_RUN_BY_INTERPRETER) and not os.access(boot, os.X_OK):
            # the shim runs a .py with python, a .sh with bash, anything else itself: this one would fail to start
            # on every host ("Permission denied"), after the job was made
            raise SpecError("boot_file", f"is not executable, nor a .py or .sh file ({boot})", given,
                            "make it executable (chmod +x), or give a .py or .sh file")  # fmt: skip
        return
    what = "a directory" if os.path.isdir(boot) else "not a regular file" if os.path.exists(boot) else "no such file"
    raise SpecError("boot_file", f"{what} in code_dir ({boot})", given, "check the path")


class UnknownWatch:
    """Says when a status has been UNKNOWN for ``patience`` seconds in a row."""

    def __init__(self, patience: float = UNKNOWN_PATIENCE, clock: Callable[[], float] = time.monotonic) -> None:
        self.patience = patience
        self.clock = clock
        self.since: Optional[float] = None

    def gave_up(self, status: JobStatus) -> bool:
        """True once ``status`` (and those before it) have been UNKNOWN for ``patience`` seconds."""
        if status.state is not JobState.UNKNOWN:
            self.since = None
            return False
        now = self.clock()
        if self.since is None:
            self.since = now
        return now - self.since >= self.patience


class PruneResult(NamedTuple):
    """What ``prune`` did: the ids it deleted (with ``dry_run``: would delete), ``(id, reason)`` for the ended or
    damaged jobs it kept, the bytes of disk freed (would free; 0 where the backend cannot tell: the cloud),
    and notes for stderr."""

    deleted: Tuple[str, ...]
    kept: Tuple[Tuple[str, str], ...]
    freed: int = 0
    dry_run: bool = False
    notes: Tuple[str, ...] = ()


class Backend(abc.ABC):
    """Runs jobs somewhere. Subclasses implement the six abstract methods described in the module docstring."""

    #: The name used in job files (``backend: local``) and on the command line (``--backend local``).
    name: ClassVar[str] = ""
    #: Where a backend that runs jobs on this machine keeps them (the SDK's home); None for the others.
    home: Optional[str] = None
    #: Where the backend's notes go (:meth:`note`; None: nowhere). A backend never writes to stderr itself.
    progress: Optional[TextIO] = None

    def note(self, text: str) -> None:
        """Tell the user ``text`` (one line, ``ma-submit: note: text``) through :attr:`progress`, if it is set."""
        if self.progress is not None:
            self.progress.write(f"ma-submit: note: {text}\n")

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
        """The job's output lines, each with one prefix naming its host and writer (``[host 1 rank 3] ``, made with
        :mod:`.lineprefix`); with ``follow`` until the job ends."""

    @abc.abstractmethod
    def stop(self, job_id: str) -> JobStatus:
        """Stop the job (idempotent); returns when nothing of it is running."""

    @abc.abstractmethod
    def list(self) -> List[JobStatus]:
        """All jobs this backend knows, newest first."""

    def check(self, plan: SubmitPlan) -> Tuple[str, ...]:
        """Raise ``SpecError`` for what would make ``execute`` refuse ``plan`` (default: code and boot file).

        Returns notes about what was found on this machine (e.g. the size of the code to copy), which
        ``--dry-run`` shows and ``submit`` prints when they are warnings (they start with ``warning:``).
        """
        check_code(plan.spec)
        return ()

    def resolve_id(self, job_id: str) -> str:
        """The full id of ``job_id``, which may be a unique prefix of one of the backend's jobs.

        Default: an id with the whole ``<name>-<YYYYmmdd-HHMMSS>-<token>`` tail of :func:`make_job_id` is taken as
        given (no request); any other is looked for among :meth:`list`'s ids (the same id first, then the one
        id it starts), else taken as given, for the next call to say whether the job exists.

        Raises:
            ConfigError: the prefix matches several jobs.
        """
        if _WHOLE_ID.search(job_id):
            return job_id
        ids = [status.id for status in self.list()]
        if job_id in ids:
            return job_id
        return one_by_prefix(job_id, ids, "job") or job_id

    def delete(self, job_id: str) -> str:
        """Remove an ended job's records; returns its id."""
        raise BackendError(f"the {self.name} backend cannot delete jobs ({job_id}); delete it on the platform")

    def prune(
        self,
        older_than: float,
        *,
        now: Optional[float] = None,
        states: AbstractSet[str] = frozenset(),
        keep: int = 0,
        dry_run: bool = False,
    ) -> PruneResult:
        """Delete every ended job (in ``states``, JobState values; empty: any) that ended more than
        ``older_than`` seconds ago, except the newest ``keep`` of them; damaged ones are kept (rule 9)."""
        when = time.time() if now is None else now
        deleted: List[str] = []
        kept: List[Tuple[str, str]] = []
        matched = 0
        for status in self.list():
            if status.state is JobState.UNKNOWN:
                if not states:
                    kept.append((status.id, f"its state is unknown ({status.message}); delete it by id"))
                continue
            if not status.is_terminal or (states and status.state.value not in states):
                continue
            matched += 1
            ended = status.ended_at or status.created_at or 0.0
            if matched > keep and when - ended >= older_than:
                deleted.append(status.id if dry_run else self.delete(status.id))
        return PruneResult(tuple(deleted), tuple(kept), dry_run=dry_run)

    def list_page(self, query: ListQuery, *, now: float) -> ListPage:
        """The newest jobs matching ``query``, cut to its limit, and how many more match (rule 9)."""
        from .listing import page_of

        return page_of(self.list(), query, now)

    def label(self, plan: SubmitPlan, labels: Mapping[str, str]) -> SubmitPlan:
        """``plan`` with ``labels`` recorded on the platform's object (rule 10); default: unchanged."""
        return plan

    def share_code(self, plan: SubmitPlan, *, upload: bool) -> SubmitPlan:
        """Prepare the code every trial of a sweep shares once (rule 11); default: nothing to share."""
        return plan

    def events(self, job_id: str) -> List[JobEvent]:
        """The platform's events of the job, oldest first (contract 12)."""
        raise BackendError(f"the {self.name} backend cannot list events ({job_id}); see the platform's console")

    def usage(self, job_id: str) -> UsageReport:
        """What each running host of the job uses now (contract 13)."""
        raise BackendError(f"the {self.name} backend cannot report usage ({job_id}); see the platform's console")

    def exec(
        self,
        job_id: str,
        command: Sequence[str],
        *,
        host: int = 0,
        tty: bool = False,
        capture: bool = True,
        stdin: Optional[bytes] = None,
    ) -> ExecResult:
        """Run ``command`` inside host ``host`` of the running job (contract 14)."""
        raise BackendError(f"the {self.name} backend cannot run commands in job {job_id}")

    def lose_host(self, job_id: str, host: int) -> JobStatus:
        """Play the platform losing host ``host``'s machine for good, to try a job's recovery by hand (``ma-submit
        host lose``). Only the local backend plays a platform; a cloud's hosts are its own."""
        raise self._no_host_requests("lose", job_id)

    def restore_host(self, job_id: str, host: int) -> JobStatus:
        """Play the platform giving lost host ``host`` a machine again (``ma-submit host restore``)."""
        raise self._no_host_requests("restore", job_id)

    def _no_host_requests(self, action: str, job_id: str) -> ConfigError:
        return ConfigError(f"host {action} works on local jobs only; job {job_id} is on {self.name}", job_id,
                           "try the recovery on a local copy of the job (backend: local)")  # fmt: skip

    def status_with_progress(self, job_id: str) -> JobStatus:
        """``status`` with the job's progress and time to recover, where reading them costs more (contract 15)."""
        return self.status(job_id)

    def checkpoints(self, job_id: str) -> CheckpointListing:
        """The checkpoints of job ``job_id`` (``ma-submit checkpoints``; contract 16)."""
        raise ConfigError(f"checkpoints of {self.name} jobs cannot be listed yet (job {job_id}): checkpoint: is "
                          f"not applied on {self.name} yet", job_id,
                          "list the folder the script wrote its checkpoints to itself")  # fmt: skip

    def resume_check(self, ref: ResumeRef, spec: JobSpec) -> ResumeRef:
        """``ref`` with its job's whole id, proven to name a complete checkpoint of an ended job that the new job
        ``spec`` can reach (contract 17)."""
        raise ConfigError(f"resume_from is not supported on {self.name}: it has no checkpoint folder a new job could "
                          "start from", ref.text(), "start from the checkpoint in the script itself, or resume a job "
                          "of the local, volcano or modelarts backend")  # fmt: skip

    def resolve_resume(self, spec: JobSpec, *, dry: bool = False) -> JobSpec:
        """``spec`` with ``resume_from`` checked and naming its job's whole id (unchanged without one). ``dry`` (a
        dry run): where the check would ask the platform's API, ``resume_from`` stays unresolved as
        :meth:`resume_unresolved` shows it, and nothing is asked (submit resolves it)."""
        if spec.resume_from is None:
            return spec
        from ..spec.resume import parse_resume  # only a job that resumes from another needs it

        ref = parse_resume(spec.resume_from)
        shown = self.resume_unresolved(ref, spec) if dry else None
        return spec.replace(resume_from=(shown or self.resume_check(ref, spec)).text())

    def resume_unresolved(self, ref: ResumeRef, spec: JobSpec) -> Optional[ResumeRef]:
        """A dry run's ``ref`` of the new job ``spec`` when :meth:`resume_check` would ask a remote API (its place
        shown as what submit resolves, after the checks that need no API); None when the check reads only this
        machine (local), and a dry run makes it."""
        del ref, spec
        return None

    def new_job_id(self, spec: JobSpec, now: float) -> str:
        """A fresh job id for ``spec`` (random token); override for backends that assign ids themselves."""
        return make_job_id(spec.name, now, os.urandom(3).hex())

    def submit(self, spec: JobSpec) -> JobHandle:
        """Plan and execute ``spec`` with a new id; the only place the clock and randomness are read."""
        spec = self.resolve_resume(spec)
        now = time.time()
        return self.execute(self.plan(spec, job_id=self.new_job_id(spec, now), now=now))

    def handle(self, job_id: str) -> JobHandle:
        """A handle for an existing job (nothing is checked until you call it)."""
        return JobHandle(self, job_id)


class Pace(NamedTuple):
    """How a wait paces itself (:meth:`JobHandle.wait`'s keyword arguments, given on to a backend's ``_wait``)."""

    poll_interval: float
    sleep: Callable[[float], None]
    clock: Callable[[], float]


class JobHandle:
    """A submitted job: ``status()``, ``wait()``, ``logs()``, ``stop()``, ``checkpoints()``; ``id`` is its job id.

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
        """Block until the job has ended and return its final status. ``poll_interval``: seconds between two looks
        at the most; ``sleep`` and ``clock``: the waiting and the time (tests give their own). A backend's handle
        changes how it waits in :meth:`_wait`, never this signature.

        Raises:
            WaitTimeout: ``timeout`` seconds passed first; the job keeps running.
            JobStateUnknown: the status stayed UNKNOWN for ``UNKNOWN_PATIENCE`` seconds (a damaged record).
        """
        return self._wait(timeout, Pace(poll_interval, sleep, clock))

    def _wait(self, timeout: Optional[float], pace: Pace) -> JobStatus:
        """:meth:`wait`'s loop: the status asked again every ``pace.poll_interval`` seconds."""
        deadline = None if timeout is None else pace.clock() + timeout
        watch = UnknownWatch(clock=pace.clock)
        while True:
            status = self.status()
            if status.is_terminal:
                return status
            if watch.gave_up(status):
                raise JobStateUnknown(self.id, status.message)
            if deadline is not None:
                left = deadline - pace.clock()
                if left <= 0:
                    raise WaitTimeout(self.id, float(timeout or 0), status.state.value)
                pace.sleep(min(pace.poll_interval, left))
            else:
                pace.sleep(pace.poll_interval)

    def logs(self, follow: bool = False) -> Iterator[str]:
        """The job's output lines (``[host N rank R] ...``); with ``follow`` until the job ends."""
        return self.backend.logs(self.id, follow=follow)

    def status_with_progress(self) -> JobStatus:
        """The status with the job's progress and time to recover (``ma-submit status``; a cloud job's are read from
        its hosts' logs)."""
        return self.backend.status_with_progress(self.id)

    def checkpoints(self) -> CheckpointListing:
        """The job's checkpoints (``ma-submit checkpoints``): each one's step, time, size and whether complete."""
        return self.backend.checkpoints(self.id)

    def stop(self) -> JobStatus:
        """Stop the job; idempotent; returns when nothing of it is left running."""
        return self.backend.stop(self.id)

    def events(self, follow: bool = False, *, poll: float = 2.0) -> Iterator[JobEvent]:
        """The job's events, oldest first; with ``follow`` new ones too, until the job has ended."""
        if not follow:
            return iter(self.backend.events(self.id))
        watch = UnknownWatch()

        def ended() -> bool:
            status = self.status()
            if watch.gave_up(status):
                raise JobStateUnknown(self.id, status.message)
            return status.is_terminal

        from .events import follow_events  # what is inside a job is read only by the verbs that show it

        return follow_events(lambda: self.backend.events(self.id), ended, poll=poll)

    def usage(self) -> UsageReport:
        """What each running host uses now."""
        return self.backend.usage(self.id)

    def exec(
        self, command: Sequence[str], *, host: int = 0, stdin: Optional[bytes] = None, capture: bool = True,
        tty: bool = False,
    ) -> ExecResult:  # fmt: skip
        """Run ``command`` (an argv list) inside host ``host``; its output is captured unless ``capture=False``."""
        return self.backend.exec(self.id, list(command), host=host, tty=tty, capture=capture, stdin=stdin)
