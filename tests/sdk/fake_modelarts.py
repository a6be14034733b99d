"""A fake ModelArts training-job API v2: a real HTTP server on 127.0.0.1 for the ModelArts backend's tests.

What it does, per request: re-signs the request with ``huaweicloudsdkcore``'s ``Signer`` and compares the
``Authorization`` header byte for byte (a mismatch answers 401 like the API gateway and is recorded);
validates create, search and action bodies against the ``huaweicloudsdkmodelarts`` models; walks each job
through Creating -> Pending -> Running -> Completed | Failed (with a task exit code) by elapsed time, or keeps
it Running until it is terminated; serves per-task logs that grow while the job runs. Faults are queued per
route: ``"429"`` (with ``Retry-After``), ``"500"`` (before doing anything), ``"drop"`` (do the work, then
close the connection without an answer) and ``"cut"`` (before doing anything: an answer whose body stops short of
the ``Content-Length`` it announced, then the connection closes, as a proxy or a server that dies midway does).

Like the real API: a search answers at most :data:`SEARCH_LIMIT` jobs a page (``limit`` 1-50, ``offset`` is
the page number, ``order`` asc/desc by creation); a log preview holds only the last ``preview_limit`` bytes
of the log (5 MB on the platform) with ``current_size`` and ``full_size``; ``.../logs/url`` answers a
temporary link to the whole log (served here under ``/obs-log/``, Range requests honoured); with ``token``
set, a request signed with another security token is refused as expired (``APIGW.0307``); an IAM action in
``denied`` answers 403 to its request as the service does for credentials whose policy lacks it (the request's
signature was good; the message names the action, in IAM's words). Tests may rotate
``ak``/``sk``/``token`` while a client runs, add text to a task's log (``append_log``), and run a hook after
each create (``after_create``).
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set, Tuple
from urllib.parse import parse_qsl, urlsplit

from fake_containers import Containers
from fake_modelarts_inside import answer, endpoints_of, route_of
from huaweicloudsdkcore.auth.credentials import BasicCredentials
from huaweicloudsdkcore.sdk_request import SdkRequest
from huaweicloudsdkcore.signer.signer import Signer
from ma_models import model_errors
from serving import stop_serving

__all__ = ["IAM_ACTIONS", "FakeJob", "FakeModelArts"]

PHASE_SECONDS = 0.3
SEARCH_LIMIT = 50
PREVIEW_LIMIT = 5 * 1024 * 1024
_SIGNED = re.compile(r"SignedHeaders=([^,]+)")

#: A job's own ``MALAUNCH_TEST_SCENARIO`` (in its create body's environments) -> its outcome.
_SCENARIOS = {"complete": ("complete", 0), "fail7": ("fail", 7), "hang": ("hang", 0)}
#: A route -> the IAM action it needs (the API reference's table of training-job permissions).
IAM_ACTIONS = {
    "create": "modelarts:trainJob:create",
    "search": "modelarts:trainJob:list",
    "get": "modelarts:trainJob:get",
    "log_url": "modelarts:trainJob:logExport",
}

@dataclass
class FakeJob:
    """One job on the fake platform."""

    id: str
    body: Dict[str, Any]
    outcome: Tuple[str, int]  # ("complete", 0) | ("fail", code) | ("hang", 0) | ("silent", 0): log = appended
    run_seconds: float
    created: float = field(default_factory=time.monotonic)
    created_ms: int = field(default_factory=lambda: int(time.time() * 1000))  # the API's create_time
    terminated_at: Optional[float] = None
    containers: Optional[Containers] = None  # nodes run for real (see fake_containers)
    appended: Dict[str, str] = field(default_factory=dict)  # task -> the log of a "silent" job
    scripted: bool = False  # made "silent": its log is only what the test appends, it ends by ``finish``
    report_exit_codes: bool = True

    @property
    def tasks(self) -> List[str]:
        count = int(self.body["spec"]["resource"].get("node_count", 1))
        return [f"worker-{index}" for index in range(count)]

    def phase(self) -> Tuple[str, float]:
        """(phase, seconds since running started)."""
        now = time.monotonic()
        if self.containers is not None:
            codes = self.containers.exit_codes()
            if codes is None:
                return ("Terminating" if self.terminated_at is not None else "Running"), 0.0
            if self.terminated_at is not None:
                return "Terminated", 0.0
            return ("Completed" if not any(codes) else "Failed"), 0.0
        if self.terminated_at is not None:
            return ("Terminated" if now - self.terminated_at > PHASE_SECONDS else "Terminating"), 0.0
        age = now - self.created
        if age < PHASE_SECONDS:
            return "Creating", 0.0
        if age < 2 * PHASE_SECONDS or self.outcome[0] == "queue":  # "queue": waits for resources for good
            return "Pending", 0.0
        running = age - 2 * PHASE_SECONDS
        if self.outcome[0] in ("hang", "silent") or running < self.run_seconds:
            return "Running", running
        return ("Completed" if self.outcome[0] == "complete" else "Failed"), running

    def log(self, task: str) -> str:
        if self.containers is not None:
            return self.containers.log(self.tasks.index(task))
        phase, running = self.phase()
        if self.scripted:
            return self.appended.get(task, "")  # runs until terminated and prints only what the test adds
        if phase in ("Creating", "Pending"):
            return ""
        total = 5
        shown = (
            total if phase in ("Completed", "Failed") else min(total, int(running / max(self.run_seconds, 0.1) * total))
        )
        lines = [f"{task} step {step}" for step in range(shown)]
        if phase == "Failed" and task == "worker-1":
            lines.append(f"{task} exiting with code {self.outcome[1]}")
        elif phase == "Completed":
            lines.append(f"{task} done")
        return "".join(line + "\n" for line in lines)

    def to_json(self) -> Dict[str, Any]:
        phase, _ = self.phase()
        status: Dict[str, Any] = {
            "phase": phase,
            "secondary_phase": "Queuing" if phase == "Pending" and self.outcome[0] == "queue" else phase,
            "duration": 1000,
            "start_time": 1700000000000,
        }
        status["tasks"] = self.tasks
        codes = self.containers.exit_codes() if self.containers is not None else None
        if codes is not None and phase in ("Completed", "Failed"):
            status["task_statuses"] = [{"task": t, "exit_code": c, "message": ""} for t, c in zip(self.tasks, codes)]
        elif phase == "Completed":
            status["task_statuses"] = [{"task": t, "exit_code": 0, "message": ""} for t in self.tasks]
        elif phase == "Failed":
            status["task_statuses"] = [
                {"task": t, "exit_code": self.outcome[1] if t == "worker-1" else 0, "message": ""} for t in self.tasks
            ]
        if not self.report_exit_codes:
            status.pop("task_statuses", None)
        metadata = dict(self.body["metadata"], id=self.id, create_time=self.created_ms)
        data = {"kind": "job", "metadata": metadata, "status": status, "algorithm": self.body["algorithm"],
                "spec": self.body["spec"]}  # fmt: skip
        endpoints = endpoints_of(self)  # fake_modelarts_inside: the SSH endpoint the job was created with
        if endpoints:
            data["endpoints"] = endpoints
        return data


class FakeModelArts:
    """The server; ``start()`` returns its base URL. Inspect ``jobs``, ``calls``, ``signature_failures``."""

    def __init__(self, ak: str, sk: str, project_id: str) -> None:
        self.ak, self.sk, self.project_id = ak, sk, project_id
        self.jobs: Dict[str, FakeJob] = {}
        self.faults: Dict[str, List[str]] = {}
        self.calls: List[Tuple[str, str, int]] = []  # (method, path, status)
        self.signature_checks = 0
        self.signature_failures: List[str] = []
        self.body_errors: List[str] = []
        self.seen_text: List[str] = []  # every raw header and body received (for the secret grep)
        self.outcome: Tuple[str, int] = ("complete", 0)
        self.run_seconds = 1.0
        self.lock = threading.Lock()
        self._server: Optional[ThreadingHTTPServer] = None
        self.url = ""
        self.run_nodes: Optional[Tuple[Any, Path, Dict[str, int]]] = None  # (s3 client, work dir, flavor -> devices)
        self.token: Optional[str] = None  # the security token requests must carry (None: not checked)
        self.preview_limit = PREVIEW_LIMIT
        self.report_exit_codes = True  # False: no ``task_statuses`` in a job's details (some platforms)
        self.log_bytes_served = 0  # log bytes sent in previews and through log links
        self.log_links = True  # False: ``.../logs/url`` answers 404 (a platform without it)
        self.log_ranges: List[str] = []  # the Range header of every read through a log link ("" for none)
        self.after_create: Optional[Callable[[FakeJob], None]] = None
        self.denied: Set[str] = set()  # IAM actions (IAM_ACTIONS' values) the credentials' policy does not allow

    # -- life cycle ------------------------------------------------------------------------------------
    def start(self) -> str:
        fake = self

        class Handler(_Handler):
            server_fake = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self.url

    def stop(self) -> None:
        for job in self.jobs.values():
            if job.containers is not None:
                job.containers.kill()
        if self._server is not None:
            stop_serving(self._server)

    def fault(self, route: str) -> Optional[str]:
        with self.lock:
            queue = self.faults.get(route) or []
            return queue.pop(0) if queue else None

    def append_log(self, job_id: str, task: str, text: str) -> None:
        """Add ``text`` to the task log of a job whose outcome is ``("silent", 0)``."""
        job = self.jobs[job_id]
        with self.lock:
            job.appended[task] = job.appended.get(task, "") + text

    def finish(self, job_id: str, code: int = 0) -> None:
        """End a "silent" job now: Completed (code 0) or Failed with that task exit code."""
        job = self.jobs[job_id]
        with self.lock:
            job.outcome, job.run_seconds = ("complete", 0) if code == 0 else ("fail", code), 0.0

    def add_job(self, name: str, outcome: Tuple[str, int] = ("complete", 0)) -> FakeJob:
        """A job made on the platform by someone else (no HTTP)."""
        body = {
            "kind": "job",
            "metadata": {"name": name, "description": "made by another client"},
            "algorithm": {"engine": {"image_url": "i:1"}, "command": "true"},
            "spec": {"resource": {"flavor_id": "f", "node_count": 1}},
        }
        job = FakeJob(str(uuid.uuid4()), body, outcome, 0.0)
        with self.lock:
            self.jobs[job.id] = job
        return job

    def count(self, method: str, suffix: str) -> int:
        return sum(1 for m, p, _ in self.calls if m == method and p.endswith(suffix))

    # -- checks ------------------------------------------------------------------------------------------
    def verify(self, handler: BaseHTTPRequestHandler, path: str, query: str, raw: bytes) -> bool:
        auth = handler.headers.get("Authorization", "")
        match = _SIGNED.search(auth)
        if not match or f"Access={self.ak}," not in auth:
            self.signature_failures.append(f"{handler.command} {path}: bad Authorization {auth[:60]!r}")
            return False
        names = match.group(1).split(";")
        headers = {name: handler.headers.get(name, "") for name in names}
        request = SdkRequest(
            method=handler.command, schema="http", host=handler.headers.get("Host"), resource_path=path,
            query_params=parse_qsl(query, keep_blank_values=True), header_params=headers, body=raw,
        )  # fmt: skip
        Signer(BasicCredentials(self.ak, self.sk, self.project_id)).sign(request)
        expected = request.header_params["Authorization"]
        with self.lock:
            self.signature_checks += 1
        if expected != auth:
            self.signature_failures.append(f"{handler.command} {path}: got {auth!r}, expected {expected!r}")
            return False
        return True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_fake: FakeModelArts
    query = ""

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _answer(self, status: int, data: Any, headers: Optional[Dict[str, str]] = None) -> None:
        raw = b"" if data is None else json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(raw)

    def _obs_log(self, path: str) -> None:
        """The whole log behind a ``logs/url`` link; ``Range: bytes=N-`` gives the bytes from N, ``bytes=-N`` the last
        N (206); a ``"500"`` queued for the route ``"obs"`` is answered first."""
        fake = self.server_fake
        _, _, job_id, task = path.split("/")[:4]
        job = fake.jobs.get(job_id)
        if job is None:
            self._answer(404, {"error": "NoSuchKey"})
            return
        raw = job.log(task).encode()
        status = 200
        asked = self.headers.get("Range", "")
        with fake.lock:
            fake.log_ranges.append(asked)
        if fake.fault("obs") == "500":
            self._answer(500, {"error": "InternalError"})
            return
        match = re.match(r"bytes=(\d+)-\Z", asked)
        suffix = re.match(r"bytes=-(\d+)\Z", asked)
        if suffix and raw:  # the last N bytes (all of a shorter log), as OBS answers a suffix range
            raw, status = raw[-int(suffix.group(1)) :], 206
        elif suffix:
            match = suffix  # an empty log: nothing to give (416)
        if match:
            start = int(match.group(1))
            if start >= len(raw):
                self.send_response(416)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            raw, status = raw[start:], 206
        with fake.lock:
            fake.log_bytes_served += len(raw)
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _answer_cut(self) -> None:
        """Announce a JSON answer of 200 bytes, send 20 of them; the connection is then closed (``_drop``)."""
        raw = json.dumps({"kind": "job", "metadata": {"id": "cut-short"}, "status": {"phase": "Running"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "200")
        self.end_headers()
        self.wfile.write(raw[:20])
        self.wfile.flush()

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _handle(self) -> None:
        fake = self.server_fake
        parts = urlsplit(self.path)
        path, query = parts.path, parts.query
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        with fake.lock:
            fake.seen_text.append(str(self.headers) + raw.decode("utf-8", "replace"))
        if path.startswith("/obs-log/"):
            self._obs_log(path)
            return
        if not fake.verify(self, path, query, raw):
            fake.calls.append((self.command, path, 401))
            self._answer(401, {"error_code": "APIGW.0301", "error_msg": "Incorrect IAM authentication information"})
            return
        token = self.headers.get("X-Security-Token")
        if fake.token is not None and token != fake.token:
            fake.calls.append((self.command, path, 401))
            self._answer(401, {"error_code": "APIGW.0307", "error_msg": "The token must be updated."})
            return
        self.query = query
        status, data, extra, drop = self._route(path, raw)
        fake.calls.append((self.command, path, status))
        if drop:
            self._drop()
            return
        self._answer(status, data, extra)

    def _route(self, path: str, raw: bytes) -> Tuple[int, Any, Dict[str, str], bool]:
        fake = self.server_fake
        base = f"/v2/{fake.project_id}"
        body = json.loads(raw) if raw else None
        method = self.command
        jobs = f"{base}/training-jobs"
        if method == "POST" and path == jobs:
            route, model = "create", "Job"
        elif method == "POST" and path == f"{base}/training-job-searches":
            route, model = "search", "JobSearches"
        elif method == "POST" and path.startswith(jobs + "/") and path.endswith("/actions"):
            route, model = "action", "JobActionType"
        elif method == "GET" and path.startswith(jobs + "/") and path.endswith("/logs/url"):
            route, model = "log_url", ""
        elif method == "GET" and path.startswith(jobs + "/"):
            route, model = (route_of(path) or ("log" if path.endswith("/logs/preview") else "get")), ""
        else:
            return 404, {"error_code": "ModelArts.0404", "error_msg": f"no route {method} {path}"}, {}, False
        action = IAM_ACTIONS.get(route)
        if action is not None and action in fake.denied:
            return 403, {"error_code": "ModelArts.0203", "error_msg": (
                f"User: {fake.ak[:4]}-user is not authorized to perform action {action} on resource "
                f"modelarts:cn-north-4:{fake.project_id}:trainJob:* because no identity-based policy allows the "
                f"{action} action.")}, {}, False  # fmt: skip
        if model:
            problems = model_errors(body, model)
            if problems:
                fake.body_errors.extend(problems)
                return 400, {"error_code": "ModelArts.2755", "error_msg": "; ".join(problems)}, {}, False
        fault = fake.fault(route)
        if fault == "cut":
            self._answer_cut()
            return 200, None, {}, True
        if fault == "429":
            return 429, {"error_code": "APIGW.0308", "error_msg": "throttled"}, {"Retry-After": "1"}, False
        if fault == "500":
            return 500, {"error_code": "ModelArts.0001", "error_msg": "internal error"}, {}, False
        status, data = self._do(route, path[len(jobs) + 1 :], body)
        return status, data, {}, fault == "drop"

    def _do(self, route: str, rest: str, body: Any) -> Tuple[int, Any]:
        fake = self.server_fake
        if route == "create":
            scenario = (body["algorithm"].get("environments") or {}).get("MALAUNCH_TEST_SCENARIO")
            job = FakeJob(str(uuid.uuid4()), body, _SCENARIOS.get(scenario, fake.outcome), fake.run_seconds)
            job.scripted = fake.outcome[0] == "silent"
            job.report_exit_codes = fake.report_exit_codes
            if fake.run_nodes is not None:
                s3, root, devices = fake.run_nodes
                flavor = body["spec"]["resource"]["flavor_id"]
                job.containers = Containers(job.id, body, s3, root, devices.get(flavor, 1))
            with fake.lock:
                fake.jobs[job.id] = job
            if fake.after_create is not None:
                fake.after_create(job)
            return 201, job.to_json()
        if route == "search":
            return self._search(body)
        job_id = rest.split("/")[0]
        job = fake.jobs.get(job_id)
        if job is None:
            return 404, {"error_code": "ModelArts.2762", "error_msg": f"training job {job_id} not found"}
        if route == "action":
            if job.phase()[0] in ("Creating", "Pending", "Running"):
                job.terminated_at = time.monotonic()
                if job.containers is not None:
                    job.containers.terminate()
            return 202, job.to_json()
        if route in ("events", "metrics"):
            return answer(fake, job, route, rest, self.query)
        if route == "log":
            raw = job.log(rest.split("/")[2]).encode()
            shown = raw[-fake.preview_limit :] if len(raw) > fake.preview_limit else raw
            text = shown.decode("utf-8", "ignore")  # a cut multi-byte character is dropped, as JSON needs text
            with fake.lock:
                fake.log_bytes_served += len(shown)
            return 200, {"content": text, "current_size": len(text.encode()), "full_size": len(raw)}
        if route == "log_url" and not fake.log_links:
            return 404, {"error_code": "ModelArts.0404", "error_msg": "no log link"}
        if route == "log_url":
            task = rest.split("/")[2]
            link = f"{fake.url}/obs-log/{job_id}/{task}?AWSAccessKeyId=TEMP&Expires=300&Signature=fake"
            return 200, {"obs_url": link}
        return 200, job.to_json()

    def _search(self, body: Dict[str, Any]) -> Tuple[int, Any]:
        fake = self.server_fake
        limit, page = body.get("limit", SEARCH_LIMIT), body.get("offset", 0)
        if not isinstance(limit, int) or not 1 <= limit <= SEARCH_LIMIT or not isinstance(page, int) or page < 0:
            return 400, {"error_code": "ModelArts.2755", "error_msg": f"limit must be 1-50, offset >= 0: {body}"}
        wanted = None
        for item in body.get("filters") or []:
            if item.get("key") == "name":
                wanted = item["value"][0]
        with fake.lock:
            jobs = sorted(fake.jobs.values(), key=lambda j: j.created, reverse=body.get("order", "desc") == "desc")
        items = [j.to_json() for j in jobs]
        items = [i for i in items if wanted is None or wanted in i["metadata"]["name"]]
        shown = items[page * limit : (page + 1) * limit]
        return 200, {"total": len(items), "count": len(shown), "limit": limit, "offset": page, "items": shown}

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()
