"""Local jobs of two emulated hosts for the SDK's tests: the entrypoint tests' ``hosts_job.py`` (each host does
what ``HOSTS_JOB_PLAN`` says and leaves ``started-h<host>-a<attempt>`` marks), submitted detached as a user does,
and a job's status as ``ma-submit status --output json`` gives it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from sdkutil import job_ids, ma_submit, wait_for, write_job

__all__ = ["HOSTS_SCRIPT", "hosts_job", "status_json", "submit_started"]

HOSTS_SCRIPT = (Path(__file__).resolve().parents[1] / "entrypoint" / "scripts" / "hosts_job.py").read_text()


def hosts_job(tmp_path: Path, name: str, plan: str, **launcher: Any) -> Path:
    """The job file of a 2-host ``hosts_job.py`` job playing ``plan``, its marks in ``tmp_path/marks``; its
    ``launcher`` section has a grace period and heartbeat timeout of 3 s, then ``launcher``."""
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"HOSTS_JOB_PLAN": plan, "HOSTS_JOB_DIR": str(marks), "MALAUNCH_RESTART_BACKOFF": "0.5"}
    return write_job(tmp_path / "job", HOSTS_SCRIPT, name=name, resources={"hosts": 2},
                     launcher={"grace_period": 3, "heartbeat_timeout": 3, **launcher}, env=env)  # fmt: skip


def submit_started(job: Path, tmp_path: Path, cli_env: Dict[str, str], home: Path) -> str:
    """Submit ``job`` (:func:`hosts_job`) detached; its id once both hosts run attempt 0."""
    submitted = ma_submit(["--detach", str(job)], cli_env)
    assert submitted.returncode == 0, submitted.stderr
    (job_id,) = job_ids(home)
    for mark in ("started-h0-a0", "started-h1-a0"):
        wait_for((tmp_path / "marks" / mark).exists, 60, mark)
    return job_id


def status_json(job_id: str, cli_env: Dict[str, str]) -> Dict[str, Any]:
    """``ma-submit status --output json JOB_ID``, read."""
    data: Dict[str, Any] = json.loads(ma_submit(["status", "--output", "json", job_id], cli_env).stdout)
    return data
