"""The ModelArts backend: upload the code to OBS, create a training job (API v2), follow it to the end.

Example::

    from malaunch.sdk.backends.modelarts.backend import ModelArtsBackend
    backend = ModelArtsBackend()                    # credentials and endpoints from the environment
    handle = backend.submit(spec)                   # upload code, create the job once; returns its id
    for line in handle.logs(follow=True):           # "[host 0 rank 0] ..." from the per-task logs
        print(line)
    print(handle.wait().exit_code)                  # the failing task's own exit code, 0 on success

``plan`` is pure: it maps the spec to the create body and the planned upload (:mod:`.request`). ``execute``
checks before it sends anything big: the code files locally, the credentials (one cheap signed call) and the
OBS bucket (one HEAD); then it uploads what changed (:mod:`.upload`), creates (:mod:`.api`) and records the
job in the local job index, so later calls without ``--backend`` find it.

One id: the job's id is the id the plan shows, which is the job's name on the platform
(``<name>-<YYYYmmdd-HHMMSS>-<token>``). Every verb takes it, or the platform's own id (``metadata.id``, a
UUID); the platform id of a name comes from the job index, else from a search by name (any machine finds it).
``JobStatus.id`` and ``list`` give the name. Logs are read by byte offset (:mod:`.tasklog`): through the whole log's
temporary link when the platform gives one, else from the log preview, saying when it skipped bytes. The API
client reads the credentials again from their source when they are refused, so a long ``wait`` outlives
temporary credentials that are renewed in the profile file.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, TextIO, Tuple

import requests

from ...errors import BackendError, ConfigError, ExecElsewhere, JobNotFound
from ...plan import SubmitPlan, new_job_secret
from ...spec.model import JobSpec
from ...spec.resume import ResumeRef
from ...status import JobState, JobStatus
from .._http import DEFAULT_POLICY, RetryPolicy
from ..base import Backend, JobHandle
from ..checkpoints import CheckpointListing
from ..events import JobEvent
from ..inside import ExecResult, UsageReport
from ..job_index import JobIndex
from .api import MAX_PAGES, SEARCH_PAGE, ModelArtsClient
from .checkpoint import checkpoint_notes, executable, resume_ref, unresolved_ref
from .credentials import Credentials, Endpoints, load_credentials, load_endpoints
from .ids import PLATFORM_ID
from .inside import (
    PAGE,
    failure_tail,
    job_events,
    latest_events,
    pending_reason,
    running_job,
    ssh_command,
    task_metrics,
    task_names,
    usage_row,
)
from .jobcode import JobCode
from .logread import TaskLogReader, TaskTails
from .phases import status_from_job, task_index
from .request import CreateRequest
from .variables import ENV_REGION

__all__ = ["ModelArtsBackend", "create_backend"]

_PROJECT_PLACEHOLDER = "{project_id}"
_USAGE_SOURCE = "the ModelArts job metrics API (per-minute averages)"


class ModelArtsBackend(Backend):
    """Runs jobs as ModelArts training jobs (see the module docstring)."""

    name = "modelarts"

    def __init__(
        self,
        *,
        environ: Optional[Mapping[str, str]] = None,
        session: Optional[requests.Session] = None,
        s3_client: Any = None,
        policy: RetryPolicy = DEFAULT_POLICY,
        sleep: Callable[[float], None] = time.sleep,
        poll: float = 2.0,
        status_interval: float = 2.0,
        stop_timeout: float = 600.0,
        progress: Optional[TextIO] = sys.stderr,
    ) -> None:
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.session = session if session is not None else requests.Session()
        self.policy = policy
        self.sleep = sleep
        self.poll = poll
        self.status_interval = status_interval
        self._recent: Dict[str, Tuple[float, JobStatus]] = {}
        self._platform_ids: Dict[str, str] = {}  # job name (our id) -> the platform's id
        self._tails: Dict[str, Tuple[str, ...]] = {}  # failed job -> its failing task's log tail
        self.stop_timeout = stop_timeout
        self.progress = progress
        self.index = JobIndex.default(self.environ)
        self.events_page = PAGE  # events asked per page (the API allows at most 100)
        self._credentials: Optional[Credentials] = None
        self._credentials_error: Optional[ConfigError] = None
        try:
            self._credentials = load_credentials(self.environ)
        except ConfigError as error:
            self._credentials_error = error
        region = self._credentials.region if self._credentials else self.environ.get(ENV_REGION) or "{region}"
        self.endpoints: Endpoints = load_endpoints(region, self.environ)
        self._api: Optional[ModelArtsClient] = None
        self._code = JobCode(lambda: self.credentials, lambda: self.api, self.endpoints, s3_client, progress)
        self._task_tails = TaskTails(lambda: self.api, self.session, self.policy)  # status_with_progress, top

    # -- helpers -----------------------------------------------------------------------------------------
    @property
    def credentials(self) -> Credentials:
        """The credentials; raises the ConfigError that loading them gave."""
        if self._credentials is None:
            assert self._credentials_error is not None
            raise self._credentials_error
        return self._credentials

    @property
    def api(self) -> ModelArtsClient:
        """The API client (made on first use)."""
        if self._api is None:
            self._api = ModelArtsClient(
                self.session,
                self.endpoints.modelarts,
                self.credentials,
                policy=self.policy, sleep=self.sleep,
                refresh=lambda: load_credentials(self.environ),
                notice=self.note,
            )
        return self._api

    # -- planning (pure) -----------------------------------------------------------------------------------
    def plan(self, spec: JobSpec, *, job_id: str, now: float) -> SubmitPlan:
        project = self._credentials.project_id if self._credentials else _PROJECT_PLACEHOLDER
        request = CreateRequest.for_spec(spec, job_id=job_id, endpoint=self.endpoints.modelarts, project_id=project)
        notes = []
        if self._credentials is None:
            notes.append(f"no credentials yet ({self._credentials_error}); the URL shows {_PROJECT_PLACEHOLDER}")
        if spec.resources.devices_per_host != 1:
            notes.append("resources.devices_per_host is set by the flavor on ModelArts (MA_NUM_GPUS)")
        if spec.keep_for is not None:
            notes.append("keep_for is not applied on ModelArts: the platform keeps its jobs; delete them there")
        notes.extend(checkpoint_notes(spec, job_id))
        return SubmitPlan(
            backend=self.name, job_id=job_id, created_at=now, spec=spec, request=request, notes=tuple(notes)
        )

    # -- execution -----------------------------------------------------------------------------------------
    def share_code(self, plan: SubmitPlan, *, upload: bool) -> SubmitPlan:
        """Sweeps: upload the code once (``upload=True``) and hand back the plan without its upload, so that N
        trials make one upload and N creates (every trial runs the same ``obs_dir/<name>/code/``)."""
        request = plan.request
        if not isinstance(request, CreateRequest) or not request.uploads:
            return plan
        if upload:
            self._code.upload(plan.spec, request)
        return dataclasses.replace(plan, request=dataclasses.replace(request, uploads=()))

    def execute(self, plan: SubmitPlan) -> JobHandle:
        request = plan.request
        if not isinstance(request, CreateRequest):
            raise BackendError(f"plan of backend {plan.backend!r} given to the modelarts backend; plan it here")
        self._code.upload(executable(plan.spec), request)
        job = self.api.create_job(request.with_secret(new_job_secret()).body)
        platform_id = str((job.get("metadata") or {}).get("id") or "")
        if not platform_id:
            raise BackendError(f"ModelArts created job {plan.job_id} but sent no metadata.id; find it in the console")
        self._platform_ids[plan.job_id] = platform_id
        try:
            self.index.record(plan.job_id, self.name, platform_id=platform_id, created_at=plan.created_at)
        except OSError as exc:
            self.note(
                f"job {plan.job_id} was created but not recorded in {self.index.path} ({exc.strerror}); give "
                "--backend modelarts when you manage it"
            )
        return self.handle(plan.job_id)

    # -- ids ---------------------------------------------------------------------------------------------------
    def _platform_id(self, job_id: str) -> str:
        """The platform's id of job ``job_id`` (our id, the job name; or the platform id itself)."""
        if PLATFORM_ID.match(job_id):
            return self.api.named(job_id, job_id)
        known = self._platform_ids.get(job_id)
        if known is None:
            entry = self.index.entries().get(job_id) or {}
            recorded = entry.get("platform_id")
            known = str(recorded) if isinstance(recorded, str) and PLATFORM_ID.match(recorded) else None
        if known is None:
            for item in self.api.search_jobs(job_id):
                metadata = item.get("metadata") or {}
                if metadata.get("name") == job_id and metadata.get("id"):
                    known = str(metadata["id"])
                    break
        if known is None:
            raise JobNotFound(job_id, self.name, "check the id with 'ma-submit list --backend modelarts'")
        self._platform_ids[job_id] = known
        return self.api.named(known, job_id)

    def resolve_id(self, job_id: str) -> str:
        """Our id of ``job_id``: the job name, also when the platform's id or a unique prefix was given."""
        return self._fetch_status(job_id).id if PLATFORM_ID.match(job_id) else super().resolve_id(job_id)

    def checkpoints(self, job_id: str) -> CheckpointListing:
        """The job's checkpoints in the OBS folder they were uploaded to (:func:`.ckptlist.obs_listing`)."""
        from .ckptlist import obs_listing  # botocore: only a listing needs it

        return obs_listing(self.api.get_job(self._platform_id(job_id)), job_id, self._code)

    def resume_check(self, ref: ResumeRef, spec: JobSpec) -> ResumeRef:
        """``--resume-from``: ``ref`` of an ended job, with its checkpoints' OBS folder (:func:`.resume_ref`)."""
        whole = self.resolve_id(ref.job_id)
        return resume_ref(self.api.get_job(self._platform_id(whole)), whole, ref)

    def resume_unresolved(self, ref: ResumeRef, spec: JobSpec) -> Optional[ResumeRef]:
        """A dry run asks no API: the old job's OBS folder shows what submit resolves (:func:`.unresolved_ref`)."""
        return unresolved_ref(ref)

    def _fetch_status(self, job_id: str, progress: bool = False) -> JobStatus:
        platform_id = self._platform_id(job_id)
        job = self.api.get_job(platform_id)
        status = status_from_job(job, self.api.job_url(platform_id))
        status = self._task_tails.added(status, job) if progress else status
        if status.state is JobState.FAILED:
            tail = failure_tail(self.api, self._tails, platform_id, job)
            status = status_from_job(job, self.api.job_url(platform_id), tail)
        if PLATFORM_ID.match(job_id) and status.id:
            self._platform_ids[status.id] = platform_id
        if status.state is JobState.PENDING:
            events = latest_events(self.api, platform_id, self.events_page)
            status = status._replace(pending_reason=pending_reason(job, events))
        self._recent[job_id] = (time.monotonic(), status)
        return status

    def status(self, job_id: str) -> JobStatus:
        """The job's status; asked again at most every ``status_interval`` seconds (the API is rate limited)."""
        recent = self._recent.get(job_id)
        if recent is not None and time.monotonic() - recent[0] < self.status_interval:
            return recent[1]
        return self._fetch_status(job_id)

    def status_with_progress(self, job_id: str) -> JobStatus:
        return self._fetch_status(job_id, progress=True)  # its shims' lines in its task logs (TaskTails)

    def logs(self, job_id: str, *, follow: bool = False) -> Iterator[str]:
        job_id = self._platform_id(job_id)
        reader = TaskLogReader(self.api, self.session, self.policy)
        while True:
            job = reader.client.get_job(job_id)
            state = status_from_job(job).state
            tasks = task_names(job)
            for position, task in enumerate(tasks):
                try:
                    yield from reader.read(job, task, task_index(task, position))
                except BackendError:
                    if not state.is_terminal and follow:
                        continue  # the task may have no log yet; ask again next round
                    raise
            if not follow or state.is_terminal:
                yield from reader.flush()
                return
            self.sleep(max(self.poll, 0.5 * len(tasks)))  # 1 + len(tasks) calls a round; the API is rate limited

    def stop(self, job_id: str) -> JobStatus:
        status = self._fetch_status(job_id)
        if status.is_terminal:
            return status
        self.api.terminate(self._platform_id(job_id))
        deadline = time.monotonic() + self.stop_timeout
        while True:
            status = self._fetch_status(job_id)
            if status.is_terminal:
                return status
            if time.monotonic() > deadline:
                raise BackendError(
                    f"job {job_id} is still {status.raw_state} {self.stop_timeout:g}s after it was told to terminate; "
                    f"check it with 'ma-submit status {job_id}'"
                )
            self.sleep(self.poll)

    # -- inside a job (see .inside) -------------------------------------------------------------------------
    def events(self, job_id: str) -> List[JobEvent]:
        """The platform's training-job events, every page, oldest first."""
        return job_events(self.api, self._platform_id(job_id), page=self.events_page)

    def usage(self, job_id: str) -> UsageReport:
        """Each task's newest metric values (the platform averages them per minute)."""
        job = running_job(self.api.get_job(self._platform_id(job_id)), job_id, "top")
        platform_id = self._platform_id(job_id)
        tasks = task_names(job)
        rows = [usage_row(task, i, task_metrics(self.api, platform_id, task)) for i, task in enumerate(tasks)]
        return UsageReport(job_id, tuple(rows), source=_USAGE_SOURCE, ranks=self._task_tails.ranks(job))

    def exec(
        self, job_id: str, command: Sequence[str], *, host: int = 0, tty: bool = False, capture: bool = True,
        stdin: Optional[bytes] = None,
    ) -> ExecResult:  # fmt: skip
        """No exec API: raises ``ExecElsewhere`` with the ssh command for the host (``modelarts.ssh`` in the job
        file), or a ``ConfigError`` saying how to enable it."""
        job = running_job(self.api.get_job(self._platform_id(job_id)), job_id, "exec")
        argv, note = ssh_command(job, job_id, host, command)
        raise ExecElsewhere(job_id, argv, note)

    def list(self) -> List[JobStatus]:
        """Every job of the project (all pages of the search), newest first; ids are the job names."""
        found = [
            status_from_job(job, self.api.job_url(str((job.get("metadata") or {}).get("id", ""))))
            for job in self.api.search_jobs()
        ]
        if self.api.left_out:
            self.note(
                f"listed the newest {len(found)} jobs of the project; {self.api.left_out} older job(s) were left out "
                f"(the search pages through at most {MAX_PAGES * SEARCH_PAGE} jobs); find one by its name with "
                "'ma-submit status NAME'"
            )
        return sorted(found, key=lambda s: (s.created_at or 0.0, s.id), reverse=True)


def create_backend(**options: Any) -> ModelArtsBackend:
    """The factory :func:`malaunch.sdk.backends.get_backend` calls."""
    return ModelArtsBackend(**options)
