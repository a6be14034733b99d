"""Issue 26 through the local backend: ``launcher.hang_timeout`` reaches every emulated host's shim, a hung job is
restarted and succeeds, and one with no restart left ends FAILED with exit 124 and class ``hang``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from hostjobs import status_json
from sdkutil import assert_nothing_running, job_ids, ma_submit, write_job

SCRIPT = (Path(__file__).resolve().parents[2] / "entrypoint" / "scripts" / "hang_job.py").read_text()


def _submit(tmp_path: Path, plan: str, **launcher: Any) -> Path:
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"HANG_PLAN": plan, "HANG_JOB_DIR": str(marks), "MALAUNCH_RESTART_BACKOFF": "0.5"}
    return write_job(tmp_path / "job", SCRIPT, name="hang", resources={"hosts": 2},
                     launcher={"grace_period": 3, "hang_timeout": 3, **launcher}, env=env)  # fmt: skip


def _status(cli_env: Dict[str, str], job_id: str) -> Dict[str, Any]:
    ma_submit(["wait", job_id], cli_env)
    return status_json(job_id, cli_env)


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_hung_job_is_restarted_and_succeeds(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    ma_submit(["--detach", str(_submit(tmp_path, "0:0=sleep,0:1=stop", max_restarts=1))], cli_env)
    (job_id,) = job_ids(home)
    status = _status(cli_env, job_id)
    assert status["state"] == "SUCCEEDED", status
    assert (tmp_path / "marks" / "started-h0-a1").exists() and (tmp_path / "marks" / "started-h1-a1").exists()
    report = json.loads((home / "jobs" / job_id / "hosts" / "0" / "report.json").read_text())
    cause = report["attempts"][0]["job_cause"]
    assert (cause["kind"], cause["host"]) == ("hang", 1)
    assert_nothing_running(job_id)


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_with_no_restart_left_a_hung_job_fails_with_124_and_class_hang(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    ma_submit(["--detach", str(_submit(tmp_path, "0:0=pipe,0:1=sleep"))], cli_env)
    (job_id,) = job_ids(home)
    status = _status(cli_env, job_id)
    assert (status["state"], status["exit_code"]) == ("FAILED", 124), status
    assert status["failure_class"]["class"] == "hang" and status["failure_class"]["retryable"] is True
    assert_nothing_running(job_id)
