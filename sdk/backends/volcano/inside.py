"""Inside a Volcano job: why it waits, its Kubernetes events, its pods' usage, and exec into a pod.

- :func:`pending_reason` (pure): from the job's queue (closed), its PodGroup's ``Unschedulable`` condition
  (``0/3 nodes are available: 3 Insufficient nvidia.com/gpu``), a scheduled pod whose container cannot start
  (``ErrImagePull``, ``ImagePullBackOff``, ...: the kubelet's reason and message, and what to check), the pods'
  ``PodScheduled=False`` reasons and the latest ``FailedScheduling`` event, in that order; the first ones found
  make the line.
- :class:`KubeInside` makes the calls: the PodGroup (owned by the Job), the Queue, core/v1 events of the Job,
  its PodGroup and its pods (``involvedObject.name``), ``metrics.k8s.io`` pod metrics (absent: no
  metrics-server), and the exec API through the ``kubernetes`` client's websocket ``stream`` (channels 0-3: stdin,
  stdout, stderr and the exit status; ``v5.channel.k8s.io`` closes stdin).
"""

from __future__ import annotations

import json
import os
import select
import sys
import termios
import tty as tty_module
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ....entrypoint.public import OutputCut, write_all
from ...errors import BackendError, JobNotFound
from ..events import JobEvent
from ..inside import ExecResult, HostUsage, UsageReport
from .client import KubeApi, core_path, objects_path
from .manifest import JOB_NAME_LABEL, TASK_NAME
from .phases import container_stuck, host_index, parse_time

__all__ = ["KubeInside", "event_of", "pending_reason"]

_SCHEDULING = ("scheduling.volcano.sh", "v1beta1")
_METRICS = ("metrics.k8s.io", "v1beta1")
_TIMEOUT = 30.0
METRICS_MISSING = (
    "metrics-server is not installed in this cluster (metrics.k8s.io is not served); install it to see CPU and "
    "memory per pod (kubectl apply -f https://github.com/kubernetes-sigs/metrics-server/releases/latest/download/"
    "components.yaml)"
)


#: What to check when a worker container waits for one of these reasons (the kubelet's words).
_STUCK_HINTS = {
    reason: "check the job file's image (name, tag) and that the cluster may pull it (imagePullSecrets)"
    for reason in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
}


def _conditions(obj: Mapping[str, Any]) -> List[Mapping[str, Any]]:
    return [c for c in (obj.get("status") or {}).get("conditions") or [] if isinstance(c, Mapping)]


def pending_reason(
    job: Mapping[str, Any],
    podgroup: Optional[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    events: Sequence[JobEvent],
    queue: Optional[Mapping[str, Any]],
) -> str:
    """Why a pending Volcano job waits, in one line (see the module docstring); pure."""
    parts: List[str] = []
    if queue is not None:
        name = (queue.get("metadata") or {}).get("name")
        state = (queue.get("status") or {}).get("state")
        if state in ("Closed", "Closing"):
            parts.append(f"queue {name} is {state.lower()}: it takes no new jobs")
    if podgroup is not None:
        name = (podgroup.get("metadata") or {}).get("name")
        for condition in _conditions(podgroup):
            if condition.get("type") == "Unschedulable" and condition.get("status") == "True":
                why = condition.get("message") or condition.get("reason") or "no reason given"
                parts.append(f"PodGroup {name} is unschedulable: {why}")
                break
    stuck = [(str((pod.get("metadata") or {}).get("name")), container_stuck(pod)) for pod in pods]
    stuck = [(name, why) for name, why in stuck if why]
    if stuck:  # scheduled, but a container cannot start: the kubelet's words for the first pod, and what to check
        name, why = stuck[0]
        more = sum(1 for _, other in stuck[1:] if other == why)
        hint = _STUCK_HINTS.get(why.split(":")[0], f"see 'kubectl describe pod {name}'")
        also = f" (and {more} more pod{'s' if more > 1 else ''} the same way)" if more else ""
        parts.append(f"pod {name} cannot start its container{also}: {why}; {hint}")
    for pod in pods:
        for condition in _conditions(pod):
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                pod_name = (pod.get("metadata") or {}).get("name")
                said = str(condition.get("message") or "")
                if not said or not any(said in part for part in parts):  # the PodGroup said it already
                    parts.append(f"pod {pod_name} not scheduled: {condition.get('reason')}: {said}")
                break
        if len(parts) > 2:
            break
    failed = [event for event in events if event.reason == "FailedScheduling"]
    if failed and not parts:
        parts.append(f"{failed[-1].source} FailedScheduling: {failed[-1].message}")
    if not parts and podgroup is not None:
        phase = (podgroup.get("status") or {}).get("phase")
        if phase:
            parts.append(f"PodGroup {(podgroup.get('metadata') or {}).get('name')} is {phase}")
    if not parts and not ((job.get("status") or {}).get("state") or {}).get("phase"):
        parts.append("the Volcano controller has not taken the job up yet (is Volcano running?)")
    return "; ".join(dict.fromkeys(parts))


def event_of(item: Mapping[str, Any], hosts: Mapping[str, int]) -> Optional[JobEvent]:
    """A core/v1 Event as a :class:`JobEvent` (None without any time)."""
    meta = item.get("metadata") or {}
    when = (
        parse_time(item.get("lastTimestamp"))
        or parse_time(item.get("eventTime"))
        or parse_time(item.get("firstTimestamp"))
        or parse_time(meta.get("creationTimestamp"))
    )
    if when is None:
        return None
    involved = item.get("involvedObject") or {}
    name = str(involved.get("name", ""))
    count = item.get("count")
    message = str(item.get("message") or "").strip()
    if isinstance(count, int) and count > 1:
        message += f" (x{count})"
    level = "Warning" if item.get("type") == "Warning" else "Info"
    source = f"{str(involved.get('kind', '')).lower()}/{name}"
    return JobEvent(when, source, str(item.get("reason") or ""), message, level, hosts.get(name))


class KubeInside:
    """The API calls behind ``events``, ``usage``, ``exec`` and the pending reason (see the module docstring)."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api

    def podgroup(self, namespace: str, job: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
        """The job's PodGroup (owned by the Job; named ``<job>-<uid>`` or ``<job>``), or None."""
        meta = job.get("metadata") or {}
        uid, name = meta.get("uid"), meta.get("name")
        found: Dict[str, Any] = self.api._call(
            f"listing the PodGroups in namespace {namespace}",
            lambda: self.api.send("GET", objects_path(*_SCHEDULING, namespace, "podgroups"), timeout=_TIMEOUT),
        )
        for item in found.get("items") or []:
            item_meta = item.get("metadata") or {}
            owners = [o.get("uid") for o in item_meta.get("ownerReferences") or []]
            if uid in owners or item_meta.get("name") in (name, f"{name}-{uid}"):
                return dict(item)
        return None

    def queue(self, name: str) -> Optional[Dict[str, Any]]:
        """The Volcano Queue ``name`` (cluster-wide), or None when it cannot be read."""
        path = objects_path(*_SCHEDULING, None, "queues", name)
        try:
            result: Dict[str, Any] = self.api._call(f"reading Volcano queue {name}",
                                                    lambda: self.api.send("GET", path, timeout=_TIMEOUT))  # fmt: skip
        except BackendError:  # refused, not JSON, or no answer after the retries: the reason goes without it
            return None
        return result

    def events(self, namespace: str, names: Sequence[str], hosts: Mapping[str, int]) -> List[JobEvent]:
        """The core/v1 events of the objects called ``names``, oldest first."""
        out: List[JobEvent] = []
        path = core_path(namespace, "events")
        for name in dict.fromkeys(names):
            query = {"fieldSelector": f"involvedObject.name={name}"}
            data: Dict[str, Any] = self.api._call(
                f"listing the events of {namespace}/{name}",
                lambda query=query: self.api.send("GET", path, query, timeout=_TIMEOUT),  # type: ignore[misc]
            )
            for item in data.get("items") or []:
                event = event_of(item, hosts)
                if event is not None:
                    out.append(event)
        return sorted(out, key=lambda event: event.time)

    def usage(self, job_id: str, namespace: str, name: str, pods: Sequence[Mapping[str, Any]]) -> UsageReport:
        """CPU and memory of each pod from ``metrics.k8s.io``; a note instead when metrics-server is missing."""
        path, query = objects_path(*_METRICS, namespace, "pods"), {"labelSelector": f"{JOB_NAME_LABEL}={name}"}
        try:
            data: Dict[str, Any] = self.api._call(
                f"reading the pod metrics of {namespace}/{name}",
                lambda: self.api.send("GET", path, query, timeout=_TIMEOUT),
                job=f"{namespace}/{name}",
            )
        except JobNotFound:  # 404: the metrics API is not served
            return UsageReport(job_id, (), note=METRICS_MISSING, source="metrics.k8s.io")
        by_pod = {str((item.get("metadata") or {}).get("name")): item for item in data.get("items") or []}
        rows = []
        for pod in pods:
            pod_name = str((pod.get("metadata") or {}).get("name"))
            index = host_index(pod)
            item = by_pod.get(pod_name)
            if item is None:
                rows.append(HostUsage(index if index is not None else -1, pod_name, note="no metrics yet"))
                continue
            used = [c.get("usage") or {} for c in item.get("containers") or []]
            cpu = sum(_quantity(u.get("cpu", "0")) for u in used)
            memory = int(sum(_quantity(u.get("memory", "0")) for u in used))
            rows.append(HostUsage(index if index is not None else -1, pod_name, cpu_cores=round(cpu, 3),
                                  memory_bytes=memory, note="accelerators: not in metrics.k8s.io"))  # fmt: skip
        rows.sort(key=lambda row: row.host)
        return UsageReport(job_id, tuple(rows), source="metrics.k8s.io (metrics-server)")

    def exec(
        self, namespace: str, pod: str, command: Sequence[str], *, tty: bool, capture: bool, stdin: Optional[bytes]
    ) -> ExecResult:
        """Run ``command`` in the pod's worker container through the exec API (see the module docstring)."""
        from kubernetes.stream import stream

        interactive = not capture and stdin is None
        try:
            ws = stream(
                self.api.core_v1().connect_get_namespaced_pod_exec, pod, namespace, command=list(command),
                container=TASK_NAME, stdin=interactive or bool(stdin), stdout=True, stderr=True, tty=tty,
                _preload_content=False, binary=True,
            )  # fmt: skip
        except self.api._k8s.client.ApiException as exc:  # the client's own call (its websocket stream)
            reason = str(exc.reason or exc)
            hint = "check that the pod runs and you may exec into it"
            if "403" in reason:
                hint = "you lack permission to exec into pods here: ask for 'create' on pods/exec in this namespace"
            elif "404" in reason:
                raise JobNotFound(f"{namespace}/{pod}", "volcano", "the pod is gone; see 'ma-submit status'") from None
            raise BackendError(f"exec into pod {namespace}/{pod} failed: {reason[:200]}; {hint}") from None
        return _pump(ws, capture=capture, stdin=stdin, interactive=interactive, tty=tty)


def _quantity(text: object) -> float:
    """A Kubernetes quantity (``250m``, ``512Mi``, ``123456n``) as a number, by the client's own parser."""
    from kubernetes.utils import parse_quantity

    parse: Callable[[object], Any] = parse_quantity
    return float(parse(text))


def _pump(ws: Any, *, capture: bool, stdin: Optional[bytes], interactive: bool, tty: bool) -> ExecResult:
    """Move bytes between this process and the websocket until the command ends; its exit code from channel 3."""
    out: List[bytes] = []
    err: List[bytes] = []
    shown = {1: 0, 2: 0}  # bytes of each channel written to this process's stdout and stderr

    def show(channel: int, data: bytes) -> None:
        try:
            write_all((sys.stdout if channel == 1 else sys.stderr).buffer, data)
        except OutputCut as cut:
            cut.written += shown[channel]  # counted from the command's first byte, not this chunk's
            raise
        shown[channel] += len(data)

    if stdin:
        ws.write_channel(0, stdin)
    if stdin is not None or not interactive:
        ws.close_channel(0)
    fd = sys.stdin.fileno() if interactive else -1
    restore = _raw_terminal(fd) if interactive and tty else None
    try:
        while ws.is_open():
            ws.update(timeout=0.1)
            for channel, sink in ((1, out), (2, err)):
                data = ws.read_channel(channel)
                if data:
                    if capture:
                        sink.append(data)
                    else:
                        show(channel, data)
            if fd >= 0 and select.select([fd], [], [], 0)[0]:
                chunk = os.read(fd, 65536)
                if chunk:
                    ws.write_channel(0, chunk)
                else:
                    ws.close_channel(0)
                    fd = -1
        for channel, sink in ((1, out), (2, err)):
            data = ws.read_channel(channel)
            if data and capture:
                sink.append(data)
            elif data:
                show(channel, data)
        return ExecResult(_returncode(ws), b"".join(out), b"".join(err))
    finally:
        if restore is not None:
            restore()
        ws.close()


def _returncode(ws: Any) -> int:
    raw = ws.read_channel(3)
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    try:
        status = json.loads(text) if text else {}
    except ValueError:
        status = {}
    if status.get("status") == "Success":
        return 0
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode" and str(cause.get("message", "")).isdigit():
            return int(cause["message"])
    raise BackendError(f"the exec ended without an exit status ({text[:120]!r}); the connection may have broken")


def _raw_terminal(fd: int) -> Optional[Any]:
    """Put the terminal in raw mode (keys go to the remote shell as typed); returns what restores it."""
    try:
        saved = termios.tcgetattr(fd)
        tty_module.setraw(fd)
    except (termios.error, OSError):
        return None

    def restore() -> None:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)

    return restore
