"""What the fake ModelArts API serves for looking inside a job: training-job events (paged), task metrics and the
SSH endpoint of a job created with ``endpoints.ssh``.

Requests are checked against ``huaweicloudsdkmodelarts``' request models (``ListTrainingJobEventsRequest``: the
query's names, ``limit`` 1-100, ``order`` asc or desc) and every answer against its response model
(``ListTrainingJobEventsResponse``, ``ShowTrainingJobMetricsResponse``), as the other endpoints are. A job's events
follow its phases; outcome ``("queue", 0)`` keeps it Pending/Queuing with an insufficient-resources warning.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Tuple
from urllib.parse import parse_qsl

from huaweicloudsdkmodelarts.v1 import model as ma_model
from ma_models import model_errors

__all__ = ["answer", "endpoints_of", "events_of", "route_of"]

QUEUE_WARNING = (
    "Insufficient resources: 0 of 2 nodes of flavor {flavor} are free in the pool; the job waits in the queue"
)


def route_of(path: str) -> str:
    """``events``, ``metrics`` or "" for a ``GET .../training-jobs/{id}/...`` path."""
    if path.endswith("/events"):
        return "events"
    return "metrics" if "/metrics/" in path else ""


def _stamp(wall: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))


def events_of(job: Any) -> List[Dict[str, str]]:
    """The job's events so far, oldest first (see the module docstring)."""
    phase, _ = job.phase()
    born = time.time() - (time.monotonic() - job.created)
    flavor = job.body["spec"]["resource"]["flavor_id"]
    out = [{"time": _stamp(born), "level": "Info", "source": "job", "message": "Job created"}]
    if phase == "Creating":
        return out
    out.append({"time": _stamp(born + 0.3), "level": "Info", "source": "job",
                "message": f"Queuing: waiting for {len(job.tasks)} node(s) of flavor {flavor}"})  # fmt: skip
    if job.outcome[0] == "queue":
        out.append({"time": _stamp(born + 0.4), "level": "Warning", "source": "job",
                    "message": QUEUE_WARNING.format(flavor=flavor)})  # fmt: skip
    if phase == "Pending":
        return out
    for task in job.tasks:
        out.append({"time": _stamp(born + 0.6), "level": "Info", "source": task, "message": f"Started: task {task}"})
    if phase == "Failed":
        out.append({"time": _stamp(born + 0.6 + job.run_seconds), "level": "Error", "source": "worker-1",
                    "message": f"Exited: task worker-1 exited with code {job.outcome[1]}"})  # fmt: skip
    if phase in ("Completed", "Failed", "Terminated"):
        out.append({"time": _stamp(born + 0.7 + job.run_seconds), "level": "Info", "source": "job",
                    "message": f"Job {phase.lower()}"})  # fmt: skip
    return out


def endpoints_of(job: Any) -> Dict[str, Any]:
    """``endpoints`` of a job's details: the SSH endpoint it was created with, addresses once it runs."""
    asked = (job.body.get("endpoints") or {}).get("ssh")
    if not asked:
        return {}
    ssh: Dict[str, Any] = {"key_pair_names": list(asked["key_pair_names"])}
    if job.phase()[0] == "Running":
        ssh["task_urls"] = [{"task": task, "url": f"ssh://ma-user@192.0.2.{10 + i}:{30022 + i}"}
                            for i, task in enumerate(job.tasks)]  # fmt: skip
    return {"ssh": ssh}


def _query_errors(query: str) -> List[str]:
    known = set(ma_model.ListTrainingJobEventsRequest.openapi_types) - {"training_job_id", "x_language"}
    pairs = parse_qsl(query, keep_blank_values=True)
    problems = [f"events query: {name} is not a parameter of ListTrainingJobEvents" for name, _ in pairs
                if name not in known]  # fmt: skip
    values = dict(pairs)
    if not values.get("limit", "50").isdigit() or not 1 <= int(values.get("limit", "50")) <= 100:
        problems.append(f"events query: limit must be 1-100, got {values.get('limit')!r}")
    if not values.get("offset", "0").isdigit():
        problems.append(f"events query: offset must be >= 0, got {values.get('offset')!r}")
    if values.get("order", "asc") not in ("asc", "desc"):
        problems.append(f"events query: order must be asc or desc, got {values.get('order')!r}")
    return problems


def answer(fake: Any, job: Any, route: str, rest: str, query: str) -> Tuple[int, Any]:
    """The answer to an events or metrics request of ``job``."""
    if route == "events":
        problems = _query_errors(query)
        if problems:
            fake.body_errors.extend(problems)
            return 400, {"error_code": "ModelArts.2755", "error_msg": "; ".join(problems)}
        values = dict(parse_qsl(query))
        offset, limit = int(values.get("offset", "0")), int(values.get("limit", "50"))
        events = events_of(job)
        if values.get("order") == "desc":
            events.reverse()
        page = events[offset : offset + limit]
        data: Dict[str, Any] = {"total": len(events), "offset": offset, "limit": limit,
                                "order": values.get("order", "asc"), "events": page}  # fmt: skip
        model = "ListTrainingJobEventsResponse"
    else:
        task = rest.split("/")[2]
        if task not in job.tasks:
            return 404, {"error_code": "ModelArts.2763", "error_msg": f"task {task} not found"}
        index = job.tasks.index(task)
        running = job.phase()[0] == "Running"
        data = {"metrics": [
            {"metric": "cpuUsage", "value": [-1.0, 20.0 + index] if running else []},
            {"metric": "memUsage", "value": [-1.0, 35.5 + index] if running else []},
            {"metric": "gpuUtil", "value": [-1.0, 90.0 - index] if running else []},
            {"metric": "gpuMemUsage", "value": [-1.0, 60.0] if running else []},
        ]}  # fmt: skip
        model = "ShowTrainingJobMetricsResponse"
    problems = model_errors(data, model)
    if problems:
        fake.body_errors.extend(f"answer: {p}" for p in problems)
    return 200, data
