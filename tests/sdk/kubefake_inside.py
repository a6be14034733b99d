"""What ``kubefake`` serves for looking inside a job: PodGroups with conditions, Queues, core/v1 events,
``metrics.k8s.io`` pod metrics (or their absence) and the pod exec API over a websocket.

- :func:`record_events` runs after each controller step and turns what changed (a job's phase, a pod started,
  a container ended) into core/v1 Events, as the controllers and the kubelet would; scenario ``unschedulable``
  keeps its job Pending with an ``Unschedulable`` PodGroup, ``PodScheduled=False`` pods and ``FailedScheduling``
  events (queue ``closed-q`` is Closed).
- :func:`route` answers ``GET`` on PodGroups, Queues, Events (``fieldSelector=involvedObject.name=X`` only) and
  pod metrics (404 unless ``cluster.metrics_server``); names in ``cluster.forbid`` answer 403.
- :func:`serve_exec` speaks the exec websocket protocol the ``kubernetes`` client's ``stream()`` speaks: the
  RFC 6455 handshake with subprotocol ``v5.channel.k8s.io`` (else v4), masked client frames, one channel byte
  first in each message (0 stdin, 1 stdout, 2 stderr, 3 the Status with the exit code, 255 close a channel).
  The "container" is a real process on this machine (in the pod's own folder, with the pod's variables), with a
  pseudo-terminal when ``tty=true``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import pty
import re
import struct
import subprocess
import tempfile
import threading
from typing import Any, Dict, List, Optional
from urllib.parse import parse_qs, urlparse

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_PODGROUPS = re.compile(r"^/apis/scheduling\.volcano\.sh/v1beta1/namespaces/([^/]+)/podgroups$")
_QUEUE = re.compile(r"^/apis/scheduling\.volcano\.sh/v1beta1/queues/([^/]+)$")
_EVENTS = re.compile(r"^/api/v1/namespaces/([^/]+)/events$")
_METRICS = re.compile(r"^/apis/metrics\.k8s\.io/v1beta1/namespaces/([^/]+)/pods$")
_EXEC = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/exec$")
UNSCHEDULABLE = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."


def _now() -> str:
    from kubefake import _now as now

    return now()


def _status(code: int, reason: str, message: str) -> Dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason,
            "code": code}  # fmt: skip


def _event(job: Any, kind: str, name: str, reason: str, message: str, warning: bool = False) -> None:
    job.event_count = getattr(job, "event_count", 0) + 1
    stamp = _now()
    job.events.append({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{name}.{job.event_count:04x}", "namespace": job.namespace, "creationTimestamp": stamp},
        "involvedObject": {"kind": kind, "name": name, "namespace": job.namespace},
        "reason": reason, "message": message, "type": "Warning" if warning else "Normal",
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        "source": {"component": "volcano" if kind != "Pod" else "kubelet"},
    })  # fmt: skip


def podgroup_name(job: Any) -> str:
    return f"{job.name}-{job.uid}"


def record_events(job: Any) -> None:
    """Turn what changed in ``job`` since the last step into events (see the module docstring)."""
    if not hasattr(job, "events"):
        job.events = []
        job.seen = {}
    seen: Dict[str, Any] = job.seen
    if job.phase != seen.get("phase"):
        seen["phase"] = job.phase
        _event(job, "Job", job.name, job.phase or "Created", f"job {job.name} is {job.phase}",
               warning=job.phase in ("Restarting", "Aborting", "Failed"))  # fmt: skip
    for pod in job.pods:
        state = next(iter(pod.state), "")
        key = f"pod:{pod.uid}"
        if seen.get(key) == state:
            continue
        seen[key] = state
        if job.scenario == "unschedulable":
            pod.conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                               "message": UNSCHEDULABLE}]  # fmt: skip
            _event(job, "Pod", pod.name, "FailedScheduling", UNSCHEDULABLE, warning=True)
            if pod.index == 0:
                _event(job, "PodGroup", podgroup_name(job), "Unschedulable", f"0/2 tasks in gang unschedulable: "
                       f"{UNSCHEDULABLE}", warning=True)  # fmt: skip
        elif state == "running":
            pod.conditions = [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]
            _event(job, "Pod", pod.name, "Scheduled", f"Successfully assigned {job.namespace}/{pod.name} to node-1")
            _event(job, "Pod", pod.name, "Pulled", 'Container image "img" already present on machine')
            _event(job, "Pod", pod.name, "Started", "Started container worker")
        elif state == "terminated":
            code = pod.state["terminated"]["exitCode"]
            if code not in (0, 143):
                _event(job, "Pod", pod.name, "Failed", f"container worker exited with code {code}", warning=True)


def podgroup_json(job: Any) -> Dict[str, Any]:
    conditions = []
    phase = {"Pending": "Pending", "": "Pending"}.get(job.phase, "Running")
    if job.scenario == "unschedulable":
        phase = "Inqueue"
        conditions.append({"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                           "message": f"2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, "
                                      f"2 minAvailable; Pending: 2 Unschedulable; {UNSCHEDULABLE}",
                           "transitionID": "t-1", "lastTransitionTime": _now()})  # fmt: skip
    spec = job.manifest["spec"]
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": podgroup_name(job), "namespace": job.namespace,
                     "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job.name,
                                          "uid": job.uid, "controller": True}]},
        "spec": {"minMember": spec.get("minAvailable", len(job.pods)), "queue": spec.get("queue", "default")},
        "status": {"phase": phase, "conditions": conditions},
    }  # fmt: skip


def route(handler: Any, cluster: Any, path: str, query: Dict[str, str]) -> bool:
    """Answer an inside-a-job request (True), or leave it to the caller (False). Called with the lock held."""
    jobs = [*cluster.jobs.values(), *cluster.gone]
    forbid = getattr(cluster, "forbid", set())
    if handler.command != "GET":
        return False
    if match := _PODGROUPS.match(path):
        items = [podgroup_json(j) for j in jobs if j.namespace == match.group(1)]
        handler._send(200, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroupList", "items": items})
    elif match := _QUEUE.match(path):
        name = match.group(1)
        state = "Closed" if name == "closed-q" else "Open"
        handler._send(200, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                            "metadata": {"name": name}, "spec": {"weight": 1}, "status": {"state": state}})  # fmt: skip
    elif match := _EVENTS.match(path):
        if "events" in forbid:
            handler._send(403, _status(403, "Forbidden", 'events is forbidden: User "tester" cannot list resource '
                                       '"events" in API group "" in the namespace'))  # fmt: skip
            return True
        selector = query.get("fieldSelector", "")
        wanted = re.fullmatch(r"involvedObject\.name=([a-z0-9.-]+)", selector)
        if wanted is None:
            cluster.problems.append(f"event list with field selector {selector!r}")
            handler._send(400, _status(400, "BadRequest", "unsupported field selector"))
            return True
        items = [e for j in jobs if j.namespace == match.group(1) for e in getattr(j, "events", [])
                 if e["involvedObject"]["name"] == wanted.group(1)]  # fmt: skip
        handler._send(200, {"apiVersion": "v1", "kind": "EventList", "metadata": {}, "items": items})
    elif match := _METRICS.match(path):
        if not getattr(cluster, "metrics_server", False):
            handler._send(404, _status(404, "NotFound", "the server could not find the requested resource"))
            return True
        selector = query.get("labelSelector", "")
        name = selector.partition("=")[2]
        items = []
        for job in jobs:
            for pod in job.pods:
                if job.name == name and job.namespace == match.group(1) and "running" in pod.state:
                    items.append({"metadata": {"name": pod.name, "namespace": job.namespace}, "timestamp": _now(),
                                  "window": "15s", "containers": [{"name": "worker", "usage": {
                                      "cpu": f"{250 * (pod.index + 1)}m", "memory": f"{512 * (pod.index + 1)}Mi"}}]})
        handler._send(200, {"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "items": items})
    else:
        return False
    return True


# -- exec over a websocket ------------------------------------------------------------------------------------
def _read_frame(rfile: Any) -> Optional[tuple[int, bytes]]:
    head = rfile.read(2)
    if len(head) < 2:
        return None
    opcode, size = head[0] & 0x0F, head[1] & 0x7F
    masked = head[1] & 0x80
    if size == 126:
        size = struct.unpack(">H", rfile.read(2))[0]
    elif size == 127:
        size = struct.unpack(">Q", rfile.read(8))[0]
    if not masked:
        raise ValueError("a client frame without a mask (RFC 6455 5.1)")
    mask = rfile.read(4)
    data = bytearray(rfile.read(size))
    for i in range(len(data)):
        data[i] ^= mask[i % 4]
    return opcode, bytes(data)


def _frame(opcode: int, payload: bytes) -> bytes:
    size = len(payload)
    if size < 126:
        head = bytes([0x80 | opcode, size])
    elif size < 1 << 16:
        head = bytes([0x80 | opcode, 126]) + struct.pack(">H", size)
    else:
        head = bytes([0x80 | opcode, 127]) + struct.pack(">Q", size)
    return head + payload


def serve_exec(handler: Any, cluster: Any, path: str) -> bool:
    """Run an exec request (True), or leave the request to the caller (False). Called without the lock."""
    match = _EXEC.match(path)
    if match is None:
        return False
    query = parse_qs(urlparse(handler.path).query)
    command = query.get("command", [])
    flags = {name: query.get(name, ["false"])[-1] == "true" for name in ("stdin", "stdout", "stderr", "tty")}
    cluster.exec_requests.append({"pod": match.group(2), "command": command, **flags})
    if "exec" in getattr(cluster, "forbid", set()):
        handler._send(403, _status(403, "Forbidden", 'pods "x" is forbidden: cannot create resource "pods/exec"'))
        return True
    with cluster.lock:
        pods = [(j, p) for j in cluster.jobs.values() for p in j.pods
                if j.namespace == match.group(1) and p.name == match.group(2)]  # fmt: skip
    if not pods:
        handler._send(404, _status(404, "NotFound", f'pods "{match.group(2)}" not found'))
        return True
    job, pod = pods[0]
    if query.get("container", [""])[-1] != "worker" or not command or not flags["stdout"]:
        cluster.problems.append(f"exec request {handler.path}")
        handler._send(400, _status(400, "BadRequest", "bad exec request"))
        return True
    if "running" not in pod.state:
        handler._send(400, _status(400, "BadRequest", f"container worker in pod {pod.name} is not running"))
        return True
    key = handler.headers.get("Sec-WebSocket-Key")
    offered = [p.strip() for p in (handler.headers.get("Sec-WebSocket-Protocol") or "").split(",")]
    if handler.headers.get("Upgrade", "").lower() != "websocket" or not key:
        cluster.problems.append("exec without a websocket upgrade")
        handler._send(400, _status(400, "BadRequest", "exec needs a websocket upgrade"))
        return True
    protocol = next((p for p in ("v5.channel.k8s.io", "v4.channel.k8s.io") if p in offered), None)
    if protocol is None:
        cluster.problems.append(f"exec offering subprotocols {offered}")
        handler._send(400, _status(400, "BadRequest", "no supported subprotocol"))
        return True
    accept = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
    handler.send_response(101, "Switching Protocols")
    handler.send_header("Upgrade", "websocket")
    handler.send_header("Connection", "Upgrade")
    handler.send_header("Sec-WebSocket-Accept", accept)
    handler.send_header("Sec-WebSocket-Protocol", protocol)
    handler.end_headers()
    handler.wfile.flush()
    _run_exec(handler, job, pod, command, flags["tty"], protocol == "v5.channel.k8s.io")
    handler.close_connection = True
    return True


def _run_exec(handler: Any, job: Any, pod: Any, command: List[str], tty: bool, v5: bool) -> None:
    task = job.manifest["spec"]["tasks"][0]
    env = {e["name"]: str(e.get("value", "")) for e in task["template"]["spec"]["containers"][0].get("env", [])}
    env.update(PATH=os.environ.get("PATH", ""), HOSTNAME=pod.name, VC_TASK_INDEX=str(pod.index))
    folder = getattr(pod, "folder", None) or tempfile.mkdtemp(prefix=f"{pod.name}-")
    pod.folder = folder
    send_lock = threading.Lock()

    def send(channel: int, data: bytes) -> None:
        with send_lock:
            handler.wfile.write(_frame(2, bytes([channel]) + data))
            handler.wfile.flush()

    if tty:
        master, slave = pty.openpty()
        proc = subprocess.Popen(command, cwd=folder, env=env, stdin=slave, stdout=slave, stderr=slave,
                                start_new_session=True)  # fmt: skip
        os.close(slave)
        outputs = [(master, 1)]
        stdin_fd: Optional[int] = master
    else:
        try:
            proc = subprocess.Popen(command, cwd=folder, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)  # fmt: skip
        except OSError as exc:
            send(3, json.dumps(_status(500, "InternalError", f"exec failed: {exc}")).encode())
            handler.wfile.write(_frame(8, b"\x03\xe8"))
            return
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        outputs = [(proc.stdout.fileno(), 1), (proc.stderr.fileno(), 2)]
        stdin_fd = proc.stdin.fileno()

    def pump(fd: int, channel: int) -> None:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the pseudo-terminal's other side is closed
                chunk = b""
            if not chunk:
                return
            send(channel, chunk)

    def feed() -> None:
        nonlocal stdin_fd
        while True:
            try:
                frame = _read_frame(handler.rfile)
            except (OSError, ValueError):
                frame = None
            if frame is None or frame[0] == 8:
                return
            data = frame[1]
            if not data or stdin_fd is None:
                continue
            if v5 and data[0] == 255 and data[1:2] == b"\x00":
                if not tty and proc.stdin is not None:
                    proc.stdin.close()
                    stdin_fd = None
                continue
            if data[0] == 0:
                with contextlib.suppress(OSError):
                    os.write(stdin_fd, data[1:])

    readers = [threading.Thread(target=pump, args=pair, daemon=True) for pair in outputs]
    for thread in readers:
        thread.start()
    threading.Thread(target=feed, daemon=True).start()
    code = proc.wait()
    for thread in readers:
        thread.join(timeout=10)
    if tty:
        os.close(master)
    if code == 0:
        status: Dict[str, Any] = {"metadata": {}, "status": "Success"}
    else:
        status = {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                  "message": f"command terminated with non-zero exit code: error executing command {command}, "
                             f"exit code {code}",
                  "details": {"causes": [{"reason": "ExitCode", "message": str(code if code > 0 else 128 - code)}]}}
    send(3, json.dumps(status).encode())
    with send_lock:
        handler.wfile.write(_frame(8, b"\x03\xe8"))
        handler.wfile.flush()
