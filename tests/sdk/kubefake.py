"""A small Kubernetes API server on 127.0.0.1 for the Volcano backend's tests (no cluster, no mocks).

It serves the paths the official client uses for the backend: create/get/list/delete Volcano Jobs
(``/apis/batch.volcano.sh/v1alpha1/namespaces/<ns>/jobs``), create and delete the job's Secret (checked against the
client's ``V1Secret``, owned by an existing job, garbage-collected with it), list pods by the
``volcano.sh/job-name`` label and read (and follow, chunked) a pod's log (``tailLines`` and ``limitBytes``
honoured, the cut wherever it falls; every log query kept in ``log_queries``; :func:`feed_console` adds a
container's output, a real shim's, to a pod). It checks what it receives: the bearer token, every created manifest
against the real CRD schema (strictly) and the pod template against the client's models, the label selector and the
container name; anything else is answered as the API server would (401, 404, 409, 422, 400) and recorded in
``problems``. A controller thread walks each job through Volcano's phases, one step per ``tick``:

- ``succeed``: Pending -> pods start and print -> Completing -> Completed (every container exits 0);
- ``fail7``: host 1's container exits 7; the exit-code policy aborts the job: the others end with 143,
  Aborting -> Aborted;
- ``timeout``: as ``fail7``, but host 1's log ends with an NCCL watchdog timeout and the shim's verdict
  (``failure class: collective_timeout``);
- ``oom``: host 1's container is killed for its memory (exit 137, reason ``OOMKilled``), the others end with 143
  (the same ``finishedAt``, to the second): Aborting -> Aborted;
- ``restart``: host 0's container exits 1, the ``PodFailed`` policy restarts the job (Restarting), the pods are
  created again (new uids) and then succeed: Completed;
- ``imagepull``: the pods are scheduled but their image cannot be pulled (``ErrImagePull``, then
  ``ImagePullBackOff``): Pending until deleted;
- ``run``: Running and printing until the job is deleted (then its pods go away after two ticks; with
  ``delete_ticks`` the job itself stays visible, with a ``deletionTimestamp``, that many ticks first) or
  terminated by a ``TerminateJob`` Command (``bus.volcano.sh``): Terminating (the containers get SIGTERM and
  exit 143), then Terminated, with the pods deleted and the job kept.

As unkind as a real API server: a job list is answered in pages of at most :data:`PAGE_CAP` items, whatever
``limit`` asked (with a ``continue`` token; a list without ``limit`` is recorded as a problem); a pod list
likewise, in pages of at most :data:`POD_PAGE_CAP` (without ``limit``: whole, and recorded), and faults
queued per route in ``cluster.faults`` (``"429"`` with ``Retry-After``, ``"500"``, ``"503"``, ``"403"`` (refused
for good); ``"500 stored"`` for ``POST job``: stored, then answered 500; ``"400 webhook"``: Volcano's admission
webhook denying the job; ``"404 namespace"``: the namespace does not exist; ``"404 crd"``: the API server does not
know the resource, as without Volcano's CRDs) are answered before the request is served; ``"410"`` queued for
``"<route> continue"`` (``"pods continue"``) is taken only by a request for a later page, which is refused as the
API server refuses an expired ``continue`` token.

The scenario of a job is chosen by its ``MALAUNCH_TEST_SCENARIO`` environment variable in the pod template
(``idle``, or any name not above: Running after its hello, quiet until deleted). It holds a job of 1,024 pods,
each followed: a followed log waits on its own pod's condition (woken by that pod's output), not on every tick.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import parse_qs, urlparse

import yaml
from kubefake_inside import record_events, serve_exec
from kubefake_inside import route as inside_route
from serving import stop_serving
from volcano_checks import command_errors, crd_errors, pod_template_errors, secret_errors

TOKEN = "fake-token-123"
_JOBS = re.compile(r"^/apis/batch\.volcano\.sh/v1alpha1/namespaces/([^/]+)/jobs(?:/([^/]+))?$")
_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")
_LOG = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/log$")
_SECRETS = re.compile(r"^/api/v1/namespaces/([^/]+)/secrets(?:/([^/]+))?$")
_COMMANDS = re.compile(r"^/apis/bus\.volcano\.sh/v1alpha1/namespaces/([^/]+)/commands$")
PAGE_CAP = 30
POD_PAGE_CAP = 250  # a pod list with ``limit`` is answered in pages of at most this many
_MANAGED = "app.kubernetes.io/managed-by=malaunch"


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakePod:
    """One worker pod: its container state and its output so far."""

    def __init__(self, job: FakeJob, index: int, attempt: int = 0) -> None:
        self.job = job
        self.index = index
        self.name = f"{job.name}-worker-{index}"
        self.uid = f"{job.uid}-{index}-{attempt}"
        self.phase = "Pending"
        self.state: Dict[str, Any] = {"waiting": {"reason": "ContainerCreating"}}
        self.lines: List[bytes] = []
        self.closed = False  # the container has ended: a followed log ends here
        self.conditions: List[Dict[str, Any]] = []  # set by kubefake_inside.record_events
        self.changed = threading.Condition(job.mutex)  # a follower of this pod's log waits on it alone

    def append(self, line: bytes) -> None:
        """Add output (a whole line, or a last one without newline) and wake this pod's followers (lock held)."""
        self.lines.append(line)
        self.changed.notify_all()

    def finish(self) -> None:
        """The container has ended: its followed logs end (lock held)."""
        self.closed = True
        self.changed.notify_all()

    def to_json(self) -> Dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.name,
                "namespace": self.job.namespace,
                "uid": self.uid,
                "labels": {**self.job.pod_labels, "volcano.sh/job-name": self.job.name,
                           "volcano.sh/task-spec": "worker"},
                "annotations": {"volcano.sh/task-index": str(self.index)},
            },
            "spec": {"containers": [{"name": "worker", "image": "img"}]},
            "status": {
                "phase": self.phase,
                "podIP": f"10.0.0.{self.index + 10}",
                "conditions": self.conditions,
                "containerStatuses": [
                    {"name": "worker", "image": "img", "imageID": "", "ready": "running" in self.state,
                     "restartCount": 0, "state": self.state},
                ],
            },
        }  # fmt: skip


class FakeJob:
    """A Volcano Job and the step of its scenario."""

    def __init__(self, namespace: str, manifest: Dict[str, Any], uid: str,
                 mutex: Optional[threading.RLock] = None) -> None:  # fmt: skip
        self.mutex = mutex or threading.RLock()  # the cluster's: a pod's Condition shares it
        self.namespace = namespace
        self.manifest = manifest
        self.name = str(manifest["metadata"]["name"])
        self.uid = uid
        self.created = _now()
        self.phase = ""
        self.step = 0
        task = manifest["spec"]["tasks"][0]
        env = {e["name"]: e.get("value") for e in task["template"]["spec"]["containers"][0].get("env", [])}
        self.scenario = str(env.get("MALAUNCH_TEST_SCENARIO", "succeed"))
        self.pod_labels = dict(task["template"].get("metadata", {}).get("labels") or {})
        self.pods = [FakePod(self, i) for i in range(int(task["replicas"]))]
        self.deleted_at: Optional[int] = None
        self.deleting: Optional[int] = None  # ticks since DELETE: the object stays (deletionTimestamp) a while
        self.terminate_requested = False  # a TerminateJob Command arrived
        self.terminating = 0  # steps of the termination done
        self.retry_count = 0  # RestartJob restarts done (status.retryCount)

    def to_json(self) -> Dict[str, Any]:
        data = json.loads(json.dumps(self.manifest))
        data["metadata"].update({"uid": self.uid, "creationTimestamp": self.created, "namespace": self.namespace})
        if self.phase:
            data["status"] = {"state": {"phase": self.phase, "lastTransitionTime": _now()}}
            if self.retry_count:  # Volcano leaves a zero count out
                data["status"]["retryCount"] = self.retry_count
        if self.deleting is not None:
            data["metadata"]["deletionTimestamp"] = _now()
        return data

    def _print(self, pod: FakePod, text: str) -> None:
        pod.append(text.encode() + b"\n")

    def _end(self, pod: FakePod, code: int, reason: str = "") -> None:
        reason = reason or ("Completed" if code == 0 else "Error")
        pod.state = {"terminated": {"exitCode": code, "reason": reason, "startedAt": self.created,
                                    "finishedAt": _now()}}  # fmt: skip
        pod.phase = "Succeeded" if code == 0 else "Failed"
        pod.finish()

    def _pull_fails(self, step: int) -> None:
        """``imagepull``: the pods are scheduled and their container waits in ``ErrImagePull``, then
        ``ImagePullBackOff``, as the kubelet reports an image that does not exist; the job stays Pending."""
        self.phase = "Pending"
        if step < 2:
            return
        image = self.manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["image"]
        pulled = f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": not found'
        waiting = {"reason": "ErrImagePull", "message": pulled}
        if step > 2:
            waiting = {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{image}"'}
        for pod in self.pods:
            pod.conditions = [{"type": "PodScheduled", "status": "True"}]
            pod.state = {"waiting": waiting}

    def _terminate(self) -> None:
        """A step of TerminateJob: the containers get SIGTERM, then the pods are deleted; the job stays."""
        self.terminating += 1
        if self.terminating == 1:
            self.phase = "Terminating"
            for pod in self.pods:
                if not pod.closed:
                    self._print(pod, f"[rank {pod.index}] got SIGTERM")
                    self._end(pod, 143)
        elif self.terminating == 2:
            self.phase = "Terminated"
            self.pods = []

    def advance(self) -> None:
        """One controller step."""
        if self.terminate_requested:
            self._terminate()
            return
        self.step += 1
        step, pods = self.step, self.pods
        if self.scenario == "unschedulable":  # the gang never fits: Pending for good (kubefake_inside)
            self.phase = "Pending"
            return
        if self.scenario == "imagepull":  # scheduled, but the kubelet cannot pull the image: Pending for good
            self._pull_fails(step)
            return
        if step == 1:
            self.phase = "Pending"
        elif step == 2:
            self.phase = "Running"
            for pod in pods:
                pod.phase = "Running"
                pod.state = {"running": {"startedAt": _now()}}
                self._print(pod, f"[rank {pod.index}] hello from host {pod.index}")
        elif self.scenario == "restart" and step == 3:
            self._print(pods[0], "[rank 0] transient failure")
            self._end(pods[0], 1)
            self.phase = "Restarting"
            self.retry_count += 1
        elif self.scenario == "restart" and step == 4:
            for pod in pods:
                pod.finish()
            self.pods = [FakePod(self, i, attempt=1) for i in range(len(pods))]
            for pod in self.pods:
                pod.phase = "Running"
                pod.state = {"running": {"startedAt": _now()}}
                self._print(pod, f"[rank {pod.index}] attempt 2")
            self.phase = "Running"
        elif self.scenario == "restart" and step == 5:
            for pod in pods:
                self._end(pod, 0)
            self.phase = "Completed"
        elif self.scenario == "run" and step >= 3:
            for pod in pods:
                self._print(pod, f"[rank {pod.index}] step {step}")
        elif self.scenario == "succeed" and step == 3:
            for pod in pods:
                pod.append(f"[rank {pod.index}] done, no newline".encode())
                self._end(pod, 0)
            self.phase = "Completing"
        elif self.scenario == "succeed" and step == 4:
            self.phase = "Completed"
        elif self.scenario == "oom" and step == 3:  # the kernel kills host 1's container: its log just stops
            self._print(pods[1], "[rank 1] step 3")
            self._end(pods[1], 137, "OOMKilled")
            self.phase = "Aborting"
        elif self.scenario == "oom" and step == 4:
            for pod in pods:
                if not pod.closed:
                    self._end(pod, 143)  # within the second of the kill, as the abort often is: one finishedAt
                    pod.state["terminated"]["finishedAt"] = pods[1].state["terminated"]["finishedAt"]
            self.phase = "Aborted"
        elif self.scenario in ("fail7", "timeout") and step == 3:
            if self.scenario == "timeout":  # the shim's own lines end the log, as in a real pod
                self._print(pods[1], "[rank 1] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(...)")
                self._print(pods[1], "[ma-entrypoint] failure class: collective_timeout (retryable): a collective ...")
            else:
                self._print(pods[1], "[rank 1] RuntimeError: boom")
            self._end(pods[1], 7)
            self.phase = "Aborting"
        elif self.scenario in ("fail7", "timeout") and step == 4:
            for pod in pods:
                if not pod.closed:
                    self._print(pod, f"[rank {pod.index}] got SIGTERM")
                    self._end(pod, 143)
            self.phase = "Aborted"


class FakeCluster:
    """The server's state, shared by the handler threads and the controller thread."""

    def __init__(self, tick: float) -> None:
        self.tick = tick
        self.mutex = threading.RLock()
        self.lock = threading.Condition(self.mutex)
        self.jobs: Dict[Tuple[str, str], FakeJob] = {}
        self.gone: List[FakeJob] = []  # deleted jobs whose pods still exist
        self.delete_ticks = 0  # ticks a deleted job stays visible (as behind a finalizer); 0: gone at once
        self.problems: List[str] = []
        self.requests: List[Tuple[str, str]] = []
        self.created: List[Dict[str, Any]] = []
        self.phases: List[str] = []  # every phase any job went through, in order
        self.commands: List[Dict[str, Any]] = []
        self.secrets: Dict[Tuple[str, str], Dict[str, Any]] = {}  # (namespace, name) -> the Secret as created
        self.faults: Dict[str, List[str]] = {}  # route -> answers to give before serving it
        self.exec_requests: List[Dict[str, Any]] = []  # what each exec asked for (kubefake_inside)
        self.log_queries: List[Dict[str, str]] = []  # the query of every pod log read
        self.forbid: set[str] = set()  # "exec", "events": answered 403 (kubefake_inside)
        self.metrics_server = False  # whether metrics.k8s.io is served
        self._count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._control, name="fake-volcano", daemon=True)
        self._thread.start()

    def _control(self) -> None:
        while not self._stop.wait(self.tick):
            with self.lock:
                for key, job in list(self.jobs.items()):
                    if job.deleting is not None:  # still visible, with its deletionTimestamp, for delete_ticks
                        job.deleting += 1
                        if job.deleting >= self.delete_ticks:
                            self._remove(key)
                        continue
                    job.advance()
                    record_events(job)
                    if not self.phases or self.phases[-1] != job.phase:
                        self.phases.append(job.phase)
                for job in list(self.gone):
                    job.deleted_at = (job.deleted_at or 0) + 1
                    if job.deleted_at >= 2:
                        for pod in job.pods:
                            pod.finish()
                        self.gone.remove(job)
                self.lock.notify_all()

    def fault(self, route: str) -> Optional[str]:
        """The next fault queued for ``route`` (``"GET job"``, ``"POST job"``, ``"pods"``, ``"command"``...)."""
        with self.lock:
            queue = self.faults.get(route) or []
            return queue.pop(0) if queue else None

    def close(self) -> None:
        self._stop.set()
        with self.lock:
            for job in [*self.jobs.values(), *self.gone]:
                for pod in job.pods:
                    pod.finish()
            self.lock.notify_all()

    def create(self, namespace: str, body: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
        errors = crd_errors(body)
        tasks = body.get("spec", {}).get("tasks", [])
        for task in tasks:
            errors += pod_template_errors(task.get("template", {}))
        if body.get("metadata", {}).get("namespace") not in (None, namespace):
            errors.append("metadata.namespace differs from the URL's namespace")
        if errors:
            self.problems.extend(errors)
            return 422, _status(422, "Invalid", "; ".join(errors))
        key = (namespace, str(body["metadata"]["name"]))
        if key in self.jobs:
            return 409, _status(409, "AlreadyExists", f'jobs.batch.volcano.sh "{key[1]}" already exists')
        self._count += 1
        job = FakeJob(namespace, body, f"uid-{self._count}", self.mutex)
        self.jobs[key] = job
        self.created.append(body)
        return 201, job.to_json()

    def create_secret(self, namespace: str, body: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
        """A Secret, checked against the client's ``V1Secret``; its owner must be an existing job (name, uid)."""
        errors = secret_errors(body)
        owners = (body.get("metadata") or {}).get("ownerReferences") or []
        for owner in owners:
            job = self.jobs.get((namespace, str(owner.get("name"))))
            if job is None or owner.get("uid") != job.uid:
                errors.append(f"Secret owner {owner.get('name')!r} ({owner.get('uid')!r}) is no job in {namespace}")
        if errors:
            self.problems.extend(errors)
            return 422, _status(422, "Invalid", "; ".join(errors))
        key = (namespace, str(body["metadata"]["name"]))
        if key in self.secrets:
            return 409, _status(409, "AlreadyExists", f'secrets "{key[1]}" already exists')
        self.secrets[key] = body
        return 201, body

    def delete(self, job: FakeJob) -> None:
        """DELETE of a job: gone at once, or (``delete_ticks``) marked and removed by the controller later."""
        if self.delete_ticks <= 0:
            self._remove((job.namespace, job.name))
        elif job.deleting is None:
            job.deleting = 0

    def _remove(self, key: Tuple[str, str]) -> None:
        job = self.jobs.pop(key)
        self.gone.append(job)
        self.collect_garbage(job)

    def collect_garbage(self, job: FakeJob) -> None:
        """Delete the Secrets a deleted job owned, as Kubernetes' garbage collector does."""
        for key, secret in list(self.secrets.items()):
            owners = secret["metadata"].get("ownerReferences") or []
            if key[0] == job.namespace and any(owner.get("uid") == job.uid for owner in owners):
                del self.secrets[key]

    def command(self, namespace: str, body: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
        """A Volcano bus Command: only TerminateJob of an existing job, by name and uid, is understood."""
        errors = command_errors(body)
        target = body.get("target") or {}
        job = self.jobs.get((namespace, str(target.get("name"))))
        if job is None:
            errors.append(f"command target {target.get('name')!r} is no job in {namespace}")
        elif target.get("uid") != job.uid:
            errors.append(f"command target uid {target.get('uid')!r} is not the job's ({job.uid})")
        if errors:
            self.problems.extend(errors)
            return 422, _status(422, "Invalid", "; ".join(errors))
        self.commands.append(body)
        if job is not None and job.phase not in ("Completed", "Failed", "Aborted", "Terminated"):
            job.terminate_requested = True  # the controller acts on its next tick
        data = json.loads(json.dumps(body))
        data["metadata"]["name"] = f"{data['metadata'].pop('generateName', 'cmd-')}{len(self.commands)}"
        return 201, data

    def page(self, namespace: str, query: Dict[str, str]) -> Tuple[int, Dict[str, Any]]:
        """One page of the namespace's jobs by name (at most PAGE_CAP, whatever ``limit`` asked)."""
        if "limit" not in query:
            self.problems.append("job list without limit: a big namespace would come back in one answer")
        limit = min(int(query.get("limit") or PAGE_CAP), PAGE_CAP)
        start = int(query.get("continue") or 0)
        ordered = sorted((j for (ns, _), j in self.jobs.items() if ns == namespace), key=lambda j: j.name)
        items = [j.to_json() for j in ordered[start : start + limit]]
        meta: Dict[str, Any] = {"resourceVersion": "1"}
        if start + limit < len(ordered):
            meta["continue"] = str(start + limit)
        return 200, {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "JobList", "metadata": meta, "items": items}

    def pods_of(self, namespace: str, name: str) -> List[FakePod]:
        found = [j for j in [*self.jobs.values(), *self.gone] if (j.namespace, j.name) == (namespace, name)]
        return [pod for job in found for pod in job.pods if job.step >= 2 or pod.phase != "Pending"]


def pod_page(pods: List[FakePod], query: Dict[str, str]) -> Dict[str, Any]:
    """A PodList as the API server pages it: every pod without ``limit``; with it, at most ``limit`` (and at most
    :data:`POD_PAGE_CAP`) from the ``continue`` token on, with a token while more are left."""
    meta: Dict[str, Any] = {"resourceVersion": "1"}
    if "limit" not in query:
        return {"apiVersion": "v1", "kind": "PodList", "metadata": meta, "items": [p.to_json() for p in pods]}
    limit = min(int(query["limit"]), POD_PAGE_CAP)
    start = int(query.get("continue") or 0)
    if start + limit < len(pods):
        meta["continue"] = str(start + limit)
    items = [p.to_json() for p in pods[start : start + limit]]
    return {"apiVersion": "v1", "kind": "PodList", "metadata": meta, "items": items}


def _status(code: int, reason: str, message: str) -> Dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason,
            "code": code}  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as the API server (Go) does: a body sent after its headers is not held back
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _send(self, code: int, data: Dict[str, Any], headers: Optional[Dict[str, str]] = None) -> None:
        body = json.dumps(data).encode()
        self.send_response(code)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {TOKEN}":
            return True
        self.server.cluster.problems.append(f"no or wrong bearer token on {self.command} {self.path}")
        self._send(401, _status(401, "Unauthorized", "Unauthorized"))
        return False

    def _route(self) -> None:
        cluster = self.server.cluster
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        cluster.requests.append((self.command, url.path))
        if not self._authorized():
            return
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if serve_exec(self, cluster, url.path):  # streams for a while: never under the lock
            return
        jobs, pods, log = _JOBS.match(url.path), _PODS.match(url.path), _LOG.match(url.path)
        commands, secrets = _COMMANDS.match(url.path), _SECRETS.match(url.path)
        route = "log" if log else "pods" if pods else "command" if commands else f"{self.command} job"
        route = f"{self.command} secret" if secrets else route
        fault = cluster.fault(route)
        if fault == "429":
            self._send(429, _status(429, "TooManyRequests", "too many requests"), {"Retry-After": "1"})
            return
        if fault in ("500", "503"):
            self._send(int(fault), _status(int(fault), "InternalError", "etcdserver: request timed out"))
            return
        if fault == "403":  # RBAC that does not grant this (pods/log, say): refused for good, not retried
            self._send(403, _status(403, "Forbidden", f"User \"tester\" cannot {self.command} {url.path}"))
            return
        if fault == "400 webhook":  # the API server's answer when a validating webhook denies (its message inside)
            self._send(400, _status(400, "BadRequest", 'admission webhook "validatejob.volcano.sh" denied the request: '
                                    "spec.tasks[0].template.spec.containers[0].resources.requests: cpu 96 exceeds "
                                    "the capability of queue default (64)"))  # fmt: skip
            return
        if fault == "404 namespace":
            namespace = url.path.split("/namespaces/")[1].split("/")[0]
            self._send(404, _status(404, "NotFound", f'namespaces "{namespace}" not found'))
            return
        if fault == "404 crd":
            self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))
            return
        if fault == "500 stored":  # the write went through, its answer did not (etcd's timeout after the commit)
            with cluster.lock:
                if jobs and self.command == "POST" and not jobs.group(2):
                    cluster.create(jobs.group(1), json.loads(raw))
            self._send(500, _status(500, "InternalError", "etcdserver: request timed out"))
            return
        if "continue" in query and cluster.fault(f"{route} continue") == "410":  # only a later page can expire
            self._send(410, _status(410, "Expired", "The provided continue parameter is too old to display a "
                                    "consistent list result. You can start a new list without the continue "
                                    "parameter."))  # fmt: skip
            return
        with cluster.lock:
            if commands and self.command == "POST":
                self._send(*cluster.command(commands.group(1), json.loads(raw)))
            elif secrets and self.command == "POST" and not secrets.group(2):
                self._send(*cluster.create_secret(secrets.group(1), json.loads(raw)))
            elif secrets and self.command == "DELETE" and secrets.group(2):
                found = cluster.secrets.pop((secrets.group(1), secrets.group(2)), None)
                answer = {"kind": "Status", "apiVersion": "v1", "status": "Success"}
                self._send(*((200, answer) if found else (404, _status(404, "NotFound", "not found"))))
            elif jobs and self.command == "POST" and not jobs.group(2):
                self._send(*cluster.create(jobs.group(1), json.loads(raw)))
            elif jobs and self.command == "GET" and jobs.group(2):
                job = cluster.jobs.get((jobs.group(1), jobs.group(2)))
                self._send(*((200, job.to_json()) if job else (404, _status(404, "NotFound", "not found"))))
            elif jobs and self.command == "GET":
                wanted = query.get("labelSelector", "")
                if wanted != _MANAGED:
                    cluster.problems.append(f"job list with label selector {wanted!r}")
                self._send(*cluster.page(jobs.group(1), query))
            elif jobs and self.command == "DELETE" and jobs.group(2):
                job = cluster.jobs.get((jobs.group(1), jobs.group(2)))
                if job is None:
                    self._send(404, _status(404, "NotFound", "not found"))
                else:
                    cluster.delete(job)
                    self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
            elif pods and self.command == "GET":
                if "limit" not in query:
                    cluster.problems.append("pod list without limit: a 1,024-host job would come back in one answer")
                selector = query.get("labelSelector", "")
                match = re.fullmatch(r"volcano\.sh/job-name=([a-z0-9-]+)", selector)
                if selector == _MANAGED:
                    every = [p for j in [*cluster.jobs.values(), *cluster.gone] for p in j.pods]
                    found = [p for p in every if p.job.namespace == pods.group(1) and p.job.step >= 2]
                    mine = [p for p in found if p.job.pod_labels.get("app.kubernetes.io/managed-by")]
                    self._send(200, pod_page(mine, query))
                    return
                if match is None:
                    cluster.problems.append(f"pod list with label selector {selector!r}")
                    self._send(400, _status(400, "BadRequest", "unsupported label selector"))
                    return
                self._send(200, pod_page(cluster.pods_of(pods.group(1), match.group(1)), query))
            elif log and self.command == "GET":
                self._log(log.group(1), log.group(2), query)
            elif inside_route(self, cluster, url.path, query):  # PodGroups, Queues, events, metrics
                pass
            else:
                cluster.problems.append(f"unexpected request {self.command} {self.path}")
                self._send(404, _status(404, "NotFound", "no such path on the fake server"))

    def _log(self, namespace: str, name: str, query: Dict[str, str]) -> None:
        cluster = self.server.cluster
        if query.get("container") != "worker":
            cluster.problems.append(f"log of container {query.get('container')!r}")
        found = [p for j in [*cluster.jobs.values(), *cluster.gone] for p in j.pods if j.namespace == namespace]
        pod = next((p for p in found if p.name == name), None)
        if pod is None:
            self._send(404, _status(404, "NotFound", f'pods "{name}" not found'))
            return
        cluster.log_queries.append(dict(query))
        if query.get("follow") != "true":
            tail, limit = query.get("tailLines"), query.get("limitBytes")
            body = b"".join(pod.lines[-int(tail) :] if tail is not None else pod.lines)
            body = body[: int(limit)] if limit is not None else body  # cut where it falls, as the API server does
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        while True:
            for line in pod.lines[sent:]:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.flush()
            sent = len(pod.lines)
            if pod.closed:
                break
            pod.changed.wait(1.0)  # woken by this pod's own output or end, not by every tick
        self.wfile.write(b"0\r\n\r\n")

    do_GET = do_POST = do_DELETE = _route


def feed_console(cluster: FakeCluster, namespace: str, name: str, host: int, data: bytes) -> None:
    """Append ``data`` (a container's console output: a real shim's, say) to host ``host``'s pod log of a job."""
    with cluster.lock:
        pod = next(pod for pod in cluster.jobs[(namespace, name)].pods if pod.index == host)
        for line in data.splitlines(keepends=True):
            pod.append(line)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 2048  # a follower of a 1,024-host job opens 1,024 streams at once
    cluster: FakeCluster


class FakeKube:
    """The running server: ``url``, ``cluster``, and ``kubeconfig(path)`` to write a config pointing at it."""

    def __init__(self, tick: float = 0.3) -> None:
        self.cluster = FakeCluster(tick)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.cluster = self.cluster
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-kube", daemon=True)
        self._thread.start()

    def kubeconfig(self, path: Path, namespace: str = "ml") -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": TOKEN}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester", "namespace": namespace}}],
            "current-context": "fake",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def close(self) -> None:
        self.cluster.close()
        stop_serving(self._server)


def volcano_job(scenario: str, hosts: int = 2, **fields: Any) -> Dict[str, Any]:
    """A job file's data for the fake cluster: ``vc-<scenario>`` (torchrun, ``hosts`` hosts of 1 device) that plays
    ``scenario`` (see the module's docstring); ``fields`` are added (``volcano``, ``name``, ...)."""
    return {
        "name": f"vc-{scenario}",
        "run_method": "torchrun",
        "code_dir": ".",
        "boot_file": "train.py",
        "image": "reg.example/malaunch:0.1.0",
        "backend": "volcano",
        "resources": {"hosts": hosts, "devices_per_host": 1},
        "env": {"MALAUNCH_TEST_SCENARIO": scenario},
        **fields,
    }


def submit_detached(kube: FakeKube, cli_env: Dict[str, str], tmp_path: Path,
                    data: Dict[str, Any]) -> Tuple[Dict[str, str], subprocess.CompletedProcess[str]]:  # fmt: skip
    """``ma-submit --detach`` of the job file ``data`` (with a ``train.py``) against the fake cluster, as a user
    runs it (its own home and kubeconfig under ``tmp_path``): that environment and what ma-submit answered."""
    from sdkutil import ma_submit

    env = {**cli_env, "KUBECONFIG": str(kube.kubeconfig(tmp_path / "kubeconfig")), "HOME": str(tmp_path)}
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "train.py").write_text("print('hi')\n")
    (folder / "job.yaml").write_text(yaml.safe_dump(data))
    return env, ma_submit(["--detach", str(folder / "job.yaml")], env)
