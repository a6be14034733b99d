"""What is sent, and what the shim is given: the event payload (the shim's own builder, one format) and the
``MALAUNCH_NOTIFY`` variable a backend writes for a job with ``notify:`` targets.

The secret of a webhook never goes into ``MALAUNCH_NOTIFY``: only the name of the variable that holds it
(``secret_env``), which the job's host 0 reads when it signs.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional

from malaunch.entrypoint.public import DEFAULT_NOTIFY_TIMEOUT, notify_payload

from ..spec.model import JobSpec

__all__ = ["job_info", "notify_variable", "sample_payload", "timeout_of"]


def timeout_of(spec: JobSpec) -> float:
    """``notify_timeout``, else the default (10 s)."""
    return float(spec.notify_timeout) if spec.notify_timeout is not None else float(DEFAULT_NOTIFY_TIMEOUT)


def job_info(spec: JobSpec, job_id: str, backend: str) -> Dict[str, str]:
    """The payload's ``job``: id, name and backend."""
    return {"id": job_id, "name": spec.name, "backend": backend}


def notify_variable(spec: JobSpec, job_id: str, backend: str) -> Optional[str]:
    """``MALAUNCH_NOTIFY``'s value for ``spec`` (None without targets); pure."""
    if not spec.notify:
        return None
    data = {"job": job_info(spec, job_id, backend), "timeout": timeout_of(spec),
            "targets": [target.to_dict() for target in spec.notify]}  # fmt: skip
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def sample_payload(job: Mapping[str, Any], event: str = "failed", now: Optional[float] = None) -> Dict[str, Any]:
    """A sample event for ``ma-submit notify test``: the shape a real one has, marked ``"test": true``."""
    cause = {"host": 0, "address": "127.0.0.1", "rank": 1, "exit_code": 7, "class": "user_error"}
    data: Dict[str, Any] = notify_payload(event, job, 0, cause=cause, exit_code=7, now=now)
    data["test"] = True
    data["text"] = f"(test) {data['text']}"
    return data
