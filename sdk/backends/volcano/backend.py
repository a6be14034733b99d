"""``VolcanoBackend``: run a job file as a Volcano Job on Kubernetes, and follow, stop and list such jobs.

Example::

    from malaunch.sdk import Job
    from malaunch.sdk.backends.volcano.backend import VolcanoBackend
    backend = VolcanoBackend(context="my-cluster")          # kubeconfig, context and namespace are optional
    handle = Job.from_yaml("job.yaml", backend="volcano").submit(backend)
    print(handle.wait().exit_code)

Job ids are ``<namespace>/<name>``, the same from ``new_job_id`` (the plan shows it) to ``submit``, ``status``
and ``list``; a bare ``<name>`` means the backend's namespace (the ``namespace`` argument, else the kubeconfig
context's). ``plan`` is pure and needs neither the ``kubernetes`` package nor a cluster; the client is built on
the first call that talks to the cluster, and every call runs under the one retry policy of
:mod:`.._http`. ``stop`` keeps the record: it asks Volcano to terminate the job (a ``TerminateJob`` Command,
as ``vcctl`` does), waits until the job is ``Terminated`` and none of its pods runs, and the job stays
visible as STOPPED (exit code 143, the SIGTERM its pods got) to ``status``, ``wait``, ``logs`` and ``list``
until ``delete`` (or ``prune``) removes it. A submitted job is recorded in this machine's job index
(:mod:`..job_index`), so ``ma-submit logs -f ID`` and the other verbs find it without ``--backend``. A failed
job's ``failure_class`` comes from its root-cause pod's exit code and log tail (:mod:`malaunch.sdk.failures`).
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, TextIO, Tuple

from ...errors import BackendError, ConfigError, JobNotFound
from ...plan import SubmitPlan, new_job_secret
from ...spec.model import JobSpec
from ...spec.resume import ResumeRef
from ...status import JobStatus
from .._http import DEFAULT_POLICY, RetryPolicy
from ..base import Backend, JobHandle, make_job_id
from ..checkpoints import CheckpointListing
from ..events import JobEvent
from ..inside import ExecResult, UsageReport
from ..job_index import JobIndex
from .checkpoint import check_checkpoint, checkpoint_note, executable, listing_refused, resume_ref, unresolved_ref
from .client import KubeApi, KubeTarget, connect, context_namespace, resolve_target
from .jobview import STOPPED_EXIT_CODE, JobView
from .logs import follow_pod_logs, read_pod_logs
from .manifest import (
    JOB_NAME_LABEL,
    MAX_JOB_NAME,
    VolcanoPlan,
    VolcanoRequest,
    render_manifest,
    secret_manifest,
    secret_name,
    with_labels,
)
from .options import volcano_options
from .template import load_template

__all__ = ["STOPPED_EXIT_CODE", "VolcanoBackend", "create_backend", "split_job_id", "volcano_job_name"]

_STAMP_AND_TOKEN = len("-20260101-000000-abcdef")
_POD_LABEL = "app.kubernetes.io/managed-by=malaunch"


def volcano_job_name(spec_name: str, now: float, token: str) -> str:
    """A job name that is a valid Service and host name: ``make_job_id`` on a short, letter-first stem."""
    stem = "".join(ch if ch.isalnum() else "-" for ch in spec_name.lower()).strip("-")
    if not stem[:1].isalpha():
        stem = f"j-{stem}".rstrip("-")
    stem = stem[: MAX_JOB_NAME - _STAMP_AND_TOKEN].rstrip("-")
    return make_job_id(stem, now, token)


def split_job_id(job_id: str, default_namespace: str) -> Tuple[str, str]:
    """``(namespace, name)`` of ``<namespace>/<name>`` or of a bare name."""
    namespace, _, name = job_id.rpartition("/")
    if not name or "/" in namespace:
        raise ConfigError("a volcano job id is <namespace>/<name> or <name>", job_id, "check the id")
    return namespace or default_namespace, name


class VolcanoBackend(Backend):
    """Submits jobs as Volcano Jobs through the official ``kubernetes`` client (``pip install 'malaunch[volcano]'``)."""

    name = "volcano"

    def __init__(
        self,
        *,
        kubeconfig: Optional[str] = None,
        context: Optional[str] = None,
        namespace: Optional[str] = None,
        environ: Optional[Mapping[str, str]] = None,
        poll_interval: float = 1.0,
        stop_timeout: float = 300.0,
        sleep: Callable[[float], None] = time.sleep,
        policy: RetryPolicy = DEFAULT_POLICY,
        progress: Optional[TextIO] = sys.stderr,
    ) -> None:
        self._kubeconfig = kubeconfig
        self.progress = progress  # where notes go (Backend.note; None: nowhere)
        self._context = context
        self._namespace = namespace
        self._environ = environ if environ is not None else os.environ
        self._poll = poll_interval
        self._stop_timeout = stop_timeout
        self._sleep = sleep
        self._policy = policy
        self._api: Optional[KubeApi] = None
        self._view = JobView(self.name, lambda: self.api, self._where)
        self._index = JobIndex.default(self._environ)

    # -- connection ---------------------------------------------------------------------------------------

    @property
    def api(self) -> KubeApi:
        """The API client, built on first use."""
        if self._api is None:
            self._api = connect(self._target(), policy=self._policy, sleep=self._sleep, notice=self.note)
        return self._api

    def _target(self) -> KubeTarget:
        return resolve_target(self._environ, self._kubeconfig, self._context)

    def default_namespace(self) -> Optional[str]:
        """The namespace of a bare name: the ``namespace`` argument, else the kubeconfig context's (the file is
        read, no cluster is asked); ``None`` when there is no usable kubeconfig."""
        if self._namespace:
            return self._namespace
        if self._api is not None:
            return self._api.namespace
        try:
            return context_namespace(self._target())
        except ConfigError:
            return None

    def resolve_id(self, job_id: str) -> str:
        """As :meth:`Backend.resolve_id`, a bare name, or a bare prefix of one, in :meth:`default_namespace` (as
        every other call takes a bare name): ``ms-allreduce-2026`` finds ``ml/ms-allreduce-20261122-...``."""
        namespace = self.default_namespace() if "/" not in job_id else None
        return super().resolve_id(f"{namespace}/{job_id}" if namespace else job_id)

    def _where(self, job_id: str) -> Tuple[str, str]:
        return split_job_id(job_id, self._namespace or self.api.namespace)

    # -- Backend --------------------------------------------------------------------------------------------

    def new_job_id(self, spec: JobSpec, now: float) -> str:
        """``<namespace>/<name>`` with a fresh Volcano Job name (see :func:`volcano_job_name`): the id ``submit``
        returns. Only the name when no namespace is known (no ``volcano.namespace`` and no kubeconfig)."""
        name = volcano_job_name(spec.name, now, secrets.token_hex(3))
        namespace = volcano_options(spec).namespace or self.default_namespace()
        return f"{namespace}/{name}" if namespace else name

    def plan(self, spec: JobSpec, *, job_id: str, now: float) -> SubmitPlan:
        """The Volcano Job manifest for ``spec``; reads only the template file (the packaged one by default).

        ``job_id`` is ``<namespace>/<name>`` (the plan's and the job's id) or a bare name.
        """
        namespace, name = split_job_id(job_id, "") if "/" in job_id else (None, job_id)
        text, source = load_template(volcano_options(spec).template)
        manifest = render_manifest(spec, name, text, source, namespace=namespace)
        chosen = manifest.get("metadata", {}).get("namespace")
        notes: List[str] = []
        if chosen is None:
            notes.append("no volcano.namespace: the job goes to the kubeconfig context's namespace")
        elif volcano_options(spec).namespace is None:
            notes.append(f"no volcano.namespace: the job goes to the kubeconfig context's namespace ({chosen})")
        if spec.run_method == "ranktable" or spec.launcher.msrun_rank_table:
            notes.append("the rank table must come from the cluster (RANK_TABLE_FILE, default /user/config/...)")
        if spec.checkpoint is not None:
            notes.append(checkpoint_note(spec, name))
        request = VolcanoRequest(manifest=manifest, namespace=chosen, template=source)
        plan_id = f"{chosen}/{name}" if chosen else name
        return VolcanoPlan(self.name, plan_id, now, spec, request, tuple(notes))

    def resume_check(self, ref: ResumeRef, spec: JobSpec) -> ResumeRef:
        """``--resume-from JOB_ID[:NAME]``: ``ref`` by its whole id, an ended job whose folder is on ``spec``'s
        ``checkpoint.volume``; one :class:`ConfigError` line otherwise (:func:`.checkpoint.resume_ref`)."""
        check_checkpoint(spec)  # a job without a claim is refused before the cluster is asked
        return resume_ref(spec, self._view.ended_job(self.resolve_id(ref.job_id), "--resume-from"), ref)

    def resume_unresolved(self, ref: ResumeRef, spec: JobSpec) -> Optional[ResumeRef]:
        """A dry run asks the cluster nothing: the old job as given, its place what submit resolves
        (:func:`.checkpoint.unresolved_ref`; a job that mounts no claim is refused here too)."""
        return unresolved_ref(spec, ref)

    def label(self, plan: SubmitPlan, labels: Mapping[str, str]) -> SubmitPlan:
        """The Volcano Job with ``labels`` added to its metadata (a sweep's jobs: ``-l malaunch.io/sweep-id=ID``)."""
        return with_labels(plan, labels)

    def execute(self, plan: SubmitPlan) -> JobHandle:
        """Create the Volcano Job; returns its handle (id ``<namespace>/<name>``, the plan's id) at once."""
        request = plan.request
        executable(plan.spec)
        if not isinstance(request, VolcanoRequest):
            raise BackendError(f"the volcano backend cannot execute a {plan.backend} plan; plan it with volcano")
        namespace = request.namespace or self._namespace or self.api.namespace
        manifest: Dict[str, Any] = dict(request.manifest)
        manifest["metadata"] = {**manifest["metadata"], "namespace": namespace}
        self.api.create_job_with_secret(
            namespace, manifest, lambda uid: secret_manifest(namespace, request.name, uid, new_job_secret())
        )
        job_id = f"{namespace}/{request.name}"
        try:  # so that 'ma-submit logs -f ID' and the other verbs find the job without --backend
            self._index.record(job_id, self.name, name=request.name, created_at=plan.created_at)
        except OSError as exc:
            self.note(
                f"job {job_id} was created but not recorded in {self._index.path} ({exc.strerror}); give "
                "--backend volcano when you manage it"
            )
        return self.handle(job_id)

    def checkpoints(self, job_id: str) -> CheckpointListing:
        """Refused in one line: the folder is on the cluster's volume (:func:`.checkpoint.listing_refused`)."""
        raise listing_refused(job_id)

    def events(self, job_id: str) -> List[JobEvent]:
        """The Kubernetes events of the Job, its PodGroup and its pods, oldest first."""
        return self._view.events(job_id)

    def usage(self, job_id: str) -> UsageReport:
        """CPU and memory per pod from metrics.k8s.io (a note when metrics-server is not installed)."""
        return self._view.usage(job_id)

    def exec(
        self, job_id: str, command: Sequence[str], *, host: int = 0, tty: bool = False, capture: bool = True,
        stdin: Optional[bytes] = None,
    ) -> ExecResult:  # fmt: skip
        """The exec API on host ``host``'s pod (by task index); the command's exit code passed through."""
        return self._view.exec(job_id, command, host=host, tty=tty, capture=capture, stdin=stdin)

    def status(self, job_id: str) -> JobStatus:
        """The job's state from its phase, its hosts from its pods, its exit code from the first failed pod."""
        return self._view.status(job_id)

    def status_with_progress(self, job_id: str) -> JobStatus:
        return self._view.status(job_id, progress=True)  # its shims' lines in its pods' logs (JobView.log_tails)

    def logs(self, job_id: str, *, follow: bool = False) -> Iterator[str]:
        """``[host N rank R] ...`` lines of the worker pods; with ``follow`` until the job ends."""
        namespace, name = self._where(job_id)
        self.api.get_job(namespace, name)  # an unknown id fails here, not silently with no lines

        def list_pods() -> List[Dict[str, Any]]:
            return self.api.list_pods(namespace, name)

        def read_log(pod: str, follow_it: bool) -> Iterator[bytes]:
            return self.api.pod_log(namespace, pod, follow=follow_it)

        if not follow or self._view.ended(namespace, name):  # an ended job reads host after host, in order
            return read_pod_logs(list_pods, read_log)
        return follow_pod_logs(list_pods, read_log, lambda: self._view.ended(namespace, name), poll=self._poll)

    def stop(self, job_id: str) -> JobStatus:
        """Terminate the job unless it has ended, keeping its record; returns once none of its pods runs."""
        namespace, name = self._where(job_id)
        job = self.api.get_job(namespace, name)
        status = self._view.status_of(namespace, name, job, self.api.list_pods(namespace, name))
        if status.is_terminal:
            return status
        uid = str((job.get("metadata") or {}).get("uid") or "")
        self.api.terminate_job(namespace, name, uid)
        deadline = time.monotonic() + self._stop_timeout
        while True:
            job = self.api.get_job(namespace, name)
            pods = self.api.list_pods(namespace, name)
            status = self._view.status_of(namespace, name, job, pods)
            if status.is_terminal and not any(_running(pod) for pod in pods):
                return status
            if time.monotonic() > deadline:
                raise BackendError(
                    f"job {namespace}/{name} is still {status.raw_state or 'running'} {self._stop_timeout:g}s after "
                    f"it was told to terminate; check it with 'kubectl get pods -n {namespace} "
                    f"-l volcano.sh/job-name={name}'"
                )
            self._sleep(self._poll)

    def delete(self, job_id: str) -> str:
        """Delete an ended job's Volcano Job (its record goes; ``stop`` a running job first); returns once the
        cluster no longer knows the job (at most ``stop_timeout``), and forgets it in the job index."""
        namespace, name = self._where(job_id)
        status = self.status(job_id)
        if not status.is_terminal:
            raise ConfigError(
                f"job {status.id} is {status.state.value}", status.id, f"stop it first: 'ma-submit stop {status.id}'"
            )
        self.api.delete_job(namespace, name)
        self.api.delete_secret(namespace, secret_name(name))  # owned by the job: a cluster's collector also does it
        deadline = time.monotonic() + self._stop_timeout
        while True:
            try:
                self.api.get_job(namespace, name)
            except JobNotFound:
                break
            if time.monotonic() > deadline:
                raise BackendError(
                    f"job {status.id} still exists {self._stop_timeout:g}s after it was deleted (a finalizer may hold "
                    f"it); check it with 'kubectl get jobs.batch.volcano.sh -n {namespace} {name}'"
                )
            self._sleep(self._poll)
        try:
            self._index.forget(status.id)
        except OSError as exc:
            self.note(f"job {status.id} was deleted but is still in {self._index.path} ({exc.strerror})")
        return status.id

    def list(self) -> List[JobStatus]:
        """The malaunch jobs in the backend's namespace, newest first, with the state ``status`` gives.

        Two listings (jobs, page after page, and the namespace's malaunch pods), whatever the number of jobs.
        """
        namespace = self._namespace or self.api.namespace
        jobs = self.api.list_jobs(namespace)  # first: a cluster out of reach is said as "listing Volcano jobs"
        pods: Dict[str, List[Dict[str, Any]]] = {}
        for pod in self.api.list_namespace_pods(namespace, _POD_LABEL):
            owner = ((pod.get("metadata") or {}).get("labels") or {}).get(JOB_NAME_LABEL)
            if isinstance(owner, str):
                pods.setdefault(owner, []).append(pod)
        out = []
        for job in jobs:
            name = str((job.get("metadata") or {}).get("name", ""))
            out.append(self._view.status_of(namespace, name, job, pods.get(name, []), tails=False))
        return sorted(out, key=lambda s: (s.created_at or 0.0, s.id), reverse=True)


def _running(pod: Mapping[str, Any]) -> bool:
    """Whether a pod may still run something (not Succeeded or Failed)."""
    return str((pod.get("status") or {}).get("phase") or "") not in ("Succeeded", "Failed")


def create_backend(**options: Any) -> VolcanoBackend:
    """The registry's factory: ``kubeconfig``, ``context``, ``namespace`` and the other keyword arguments."""
    return VolcanoBackend(**options)
