"""What is read of a Volcano job: its status from the Job and its pods (a failed pod's log tail for its class, the
reason a pending job waits), and what ``events``, ``top`` and ``exec`` see inside it (:mod:`.inside`).

Made by :class:`~.backend.VolcanoBackend` with a way to reach the cluster (its client is built on first use) and
to split a job id; reading only: creating, stopping and deleting jobs stay with the backend.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from malaunch.entrypoint.public import newest_attempt

from ...errors import BackendError, ConfigError, JobNotFound, JobNotRunning
from ...failures import TAIL_LINES, failure_from_log
from ...status import JobState, JobStatus
from ..events import JobEvent
from ..inside import ExecResult, UsageReport
from ..logprogress import LOG_TAIL_BYTES, LOG_TAIL_LINES, HostTail, log_progress, tail_lines, with_log_progress
from .client import KubeApi
from .inside import KubeInside, pending_reason
from .logs import started_pods
from .phases import ended_why, host_index, host_statuses, job_state, parse_time, retry_count, root_cause

__all__ = ["STOPPED_EXIT_CODE", "JobView"]

#: The exit code a stopped job reports when its pods are gone (they were ended with SIGTERM).
STOPPED_EXIT_CODE = 143


class JobView:
    """Reads the Volcano jobs of backend ``name`` through ``connect()`` (the API client); ``where(job_id)`` is
    ``(namespace, name)``."""

    def __init__(self, name: str, connect: Callable[[], KubeApi], where: Callable[[str], Tuple[str, str]]) -> None:
        self.name = name
        self._connect = connect
        self._where = where
        self._tails: Dict[str, Tuple[str, ...]] = {}  # failed pod -> its log tail

    @property
    def api(self) -> KubeApi:
        """The backend's API client."""
        return self._connect()

    def status(self, job_id: str, progress: bool = False) -> JobStatus:
        """The status of job ``job_id``; with ``progress``, the progress and the time to recover its shims wrote in
        their pods' logs (:meth:`log_tails`: one read per pod, at most its last lines and bytes; none while the job
        waits)."""
        namespace, name = self._where(job_id)
        job = self.api.get_job(namespace, name)
        pods = self.api.list_pods(namespace, name)
        status = self.status_of(namespace, name, job, pods)
        if not progress or status.state is JobState.PENDING:
            return status
        return with_log_progress(status, self.log_tails(namespace, pods))

    def status_of(
        self, namespace: str, name: str, job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], tails: bool = True
    ) -> JobStatus:
        """The job's status from its object and its pods (``tails``: read a failed pod's log for its class)."""
        meta = job.get("metadata") or {}
        state_info = (job.get("status") or {}).get("state") or {}
        phase = str(state_info.get("phase") or "")
        code, culprit = root_cause(pods)
        state = job_state(phase, code)
        message = str(state_info.get("message") or state_info.get("reason") or "")
        if state is JobState.FAILED and culprit:
            why = ended_why(pods, culprit)
            message = f"pod {culprit} exited with code {code}" + (f", {why}" if why else "") + (
                f"; {message}" if message else "")  # fmt: skip
        exit_code = None
        if state is JobState.SUCCEEDED:
            exit_code = 0
        elif state is JobState.STOPPED:
            exit_code = STOPPED_EXIT_CODE if code is None else code
            message = message or "terminated"
        elif state.is_terminal:
            exit_code = code if code is not None else 1
        failure = None
        if state is JobState.FAILED and tails:
            failure = failure_from_log(exit_code or 1, self._failure_tail(namespace, culprit) if culprit else ())
        hosts = host_statuses(pods, namespace)
        starts = [h.started_at for h in hosts if h.started_at is not None]
        ends = [h.ended_at for h in hosts if h.ended_at is not None]
        ended_at = max(ends) if ends else parse_time(state_info.get("lastTransitionTime"))
        return JobStatus(
            id=f"{namespace}/{name}",
            backend=self.name,
            state=state,
            exit_code=exit_code,
            message=message,
            raw_state=phase,
            name=str((meta.get("labels") or {}).get("malaunch.io/job-name", name)),
            created_at=parse_time(meta.get("creationTimestamp")),
            started_at=min(starts) if starts else None,
            ended_at=ended_at if state.is_terminal else None,
            hosts=hosts,
            location=f"Volcano job {namespace}/{name} at {self.api.host}",
            failure_class=failure,
            pending_reason=self._pending_reason(namespace, job, pods) if tails and state is JobState.PENDING else "",
            platform_restarts=retry_count(job),
        )

    # -- inside a job (events, usage, exec; see .inside) ---------------------------------------------------
    def _pending_reason(self, namespace: str, job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> str:
        """Why the job waits; a cluster that will not say (no PodGroup API, no permission) leaves it empty."""
        inside = KubeInside(self.api)
        try:
            group = inside.podgroup(namespace, job)
            names = [str((job.get("metadata") or {}).get("name"))]
            names += [str((p.get("metadata") or {}).get("name")) for p in pods]
            if group is not None:
                names.append(str((group.get("metadata") or {}).get("name")))
            events = inside.events(namespace, names, {})
        except BackendError:
            return ""
        queue_name = ((group or {}).get("spec") or {}).get("queue") or (job.get("spec") or {}).get("queue")
        queue = inside.queue(str(queue_name)) if queue_name else None
        return pending_reason(job, group, pods, events, queue)

    def events(self, job_id: str) -> List[JobEvent]:
        """The Kubernetes events of the Job, its PodGroup and its pods, oldest first."""
        namespace, name = self._where(job_id)
        job = self.api.get_job(namespace, name)
        pods = self.api.list_pods(namespace, name)
        inside = KubeInside(self.api)
        hosts = {str((p.get("metadata") or {}).get("name")): host_index(p) for p in pods}
        names = [name, *hosts]
        try:
            group = inside.podgroup(namespace, job)
        except BackendError:
            group = None  # no PodGroup API or no permission: the other objects' events still tell the story
        if group is not None:
            names.append(str((group.get("metadata") or {}).get("name")))
        return inside.events(namespace, names, {k: v for k, v in hosts.items() if v is not None})

    def _running(self, job_id: str, what: str) -> Tuple[JobStatus, List[Dict[str, Any]]]:
        namespace, name = self._where(job_id)
        job = self.api.get_job(namespace, name)
        pods = self.api.list_pods(namespace, name)
        status = self.status_of(namespace, name, job, pods)
        if status.state is not JobState.RUNNING:
            hint = status.pending_reason or f"see 'ma-submit events {status.id}'"
            raise JobNotRunning(status.id, status.state.value, f"{what} needs a running job; {hint}")
        return status, pods

    def usage(self, job_id: str) -> UsageReport:
        """CPU and memory per pod from metrics.k8s.io (a note when metrics-server is not installed)."""
        status, pods = self._running(job_id, "top")
        namespace, name = self._where(status.id)
        report = KubeInside(self.api).usage(status.id, namespace, name, pods)
        ranks, _recovery = log_progress(self.log_tails(namespace, pods))
        return dataclasses.replace(report, ranks=tuple(newest_attempt(ranks)))

    def log_tails(self, namespace: str, pods: Sequence[Mapping[str, Any]]) -> List[HostTail]:
        """The last lines of each started pod's log (a running pod's where a host has several), by host index; a
        log that cannot be read is left out (:mod:`..logprogress`)."""
        running = {str((pod.get("metadata") or {}).get("name")) for pod in pods
                   if (pod.get("status") or {}).get("phase") == "Running"}  # fmt: skip
        chosen: Dict[int, str] = {}
        for index, pod, _uid in started_pods(pods):
            if index not in chosen or pod in running:
                chosen[index] = pod
        tails: List[HostTail] = []
        for index, pod in sorted(chosen.items()):
            try:
                data = b"".join(self.api.pod_log(namespace, pod, follow=False, tail_lines=LOG_TAIL_LINES,
                                                 limit_bytes=LOG_TAIL_BYTES))  # fmt: skip
            except (BackendError, JobNotFound):
                continue
            tails.append((index, tail_lines(data)))
        return tails

    def exec(
        self, job_id: str, command: Sequence[str], *, host: int = 0, tty: bool = False, capture: bool = True,
        stdin: Optional[bytes] = None,
    ) -> ExecResult:  # fmt: skip
        """The exec API on host ``host``'s pod (by task index); the command's exit code passed through."""
        if not command:
            raise ConfigError("exec needs a command", [], "give it after '--': ma-submit exec ID -- hostname")
        status, pods = self._running(job_id, "exec")
        by_index = {host_index(p): p for p in pods}
        pod = by_index.get(host)
        if pod is None:
            raise ConfigError(f"job {status.id} has no pod for host {host}", host,
                              f"use one of {sorted(i for i in by_index if i is not None)}")  # fmt: skip
        if (pod.get("status") or {}).get("phase") != "Running":
            raise JobNotRunning(f"{status.id} host {host}", str((pod.get("status") or {}).get("phase")),
                                "pick a running host with --host")  # fmt: skip
        namespace, _ = self._where(status.id)
        pod_name = str((pod.get("metadata") or {}).get("name"))
        return KubeInside(self.api).exec(namespace, pod_name, command, tty=tty, capture=capture, stdin=stdin)

    def _failure_tail(self, namespace: str, pod: str) -> Tuple[str, ...]:
        """The last lines of a failed pod's log (read once per pod; none when it cannot be read)."""
        key = f"{namespace}/{pod}"
        if key not in self._tails:
            try:
                data = b"".join(self.api.pod_log(namespace, pod, follow=False, tail_lines=TAIL_LINES))
            except (BackendError, JobNotFound):
                data = b""  # the pod or its log is gone: the class is decided from the exit code alone
            self._tails[key] = tuple(data.decode("utf-8", errors="replace").splitlines()[-TAIL_LINES:])
        return self._tails[key]

    def ended(self, namespace: str, name: str) -> bool:
        """Whether the job has ended (or is gone)."""
        try:
            job = self.api.get_job(namespace, name)
        except JobNotFound:
            return True
        phase = str(((job.get("status") or {}).get("state") or {}).get("phase") or "")
        return job_state(phase, None).is_terminal

    def ended_job(self, job_id: str, why: str) -> Dict[str, Any]:
        """The Volcano Job ``job_id`` once it has ended (``why``: what needs it, for the refusal).

        Raises:
            ConfigError: the job has not ended.
        """
        namespace, name = self._where(job_id)
        job = self.api.get_job(namespace, name)
        status = self.status_of(namespace, name, job, self.api.list_pods(namespace, name), tails=False)
        if not status.is_terminal:
            raise ConfigError(f"{why}: job {status.id} is {status.state.value}", None,
                              f"wait for it to end, or stop it first: 'ma-submit stop {status.id}'")  # fmt: skip
        return job
