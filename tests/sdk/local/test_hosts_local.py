"""Issue 25 through the local backend: the same shim code coordinates the emulated hosts (the runner only plays
the platform: it replaces a host whose shim was killed, as a platform replaces a pod, and ends the job when a
host's shim exits non-zero)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any, Dict

import pytest
from hostjobs import hosts_job, status_json, submit_started
from malaunch.entrypoint.run.procs import proctree
from sdkutil import assert_nothing_running, ma_submit


def _state(home: Path, job_id: str) -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads((home / "jobs" / job_id / "state.json").read_text())
    return data


def _kill_host(home: Path, job_id: str, index: int, sig: int) -> None:
    """Signal host ``index``'s shim and what runs under it, each proven the job's by its MALAUNCH_JOB_ID."""
    root = _state(home, job_id)["hosts"][index]["pid"]
    for pid in [root] + [info.pid for info in proctree.descendants(root)]:
        environ = proctree.read_environ(pid)
        if environ is not None and proctree.env_has(environ, "MALAUNCH_JOB_ID", job_id):
            os.kill(pid, sig)


def _submit(tmp_path: Path, cli_env: Dict[str, str], plan: str, **launcher: Any) -> Path:
    return hosts_job(tmp_path, "hl", plan, **{"host_wait": 30, **launcher})


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_host_killed_is_replaced_and_the_job_succeeds_with_both(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    job = _submit(tmp_path, cli_env, "0:0=sleep,0:1=sleep", max_restarts=2, restart_on="always")
    job_id = submit_started(job, tmp_path, cli_env, home)
    _kill_host(home, job_id, 1, signal.SIGKILL)
    done = ma_submit(["wait", job_id], cli_env)
    status = status_json(job_id, cli_env)
    assert status["state"] == "SUCCEEDED", (done.stdout[-2000:], status)
    assert (tmp_path / "marks" / "started-h1-a1").exists() and (tmp_path / "marks" / "started-h0-a1").exists()
    report = json.loads((home / "jobs" / job_id / "hosts" / "0" / "report.json").read_text())
    assert report["attempts"][0]["job_cause"]["kind"] == "host_lost"
    assert_nothing_running(job_id)


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_frozen_host_fails_the_job_with_host_lost(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    job = _submit(tmp_path, cli_env, "0:0=sleep,0:1=sleep")  # no restarts: the frozen host ends the job
    job_id = submit_started(job, tmp_path, cli_env, home)
    _kill_host(home, job_id, 1, signal.SIGSTOP)
    try:
        ma_submit(["wait", job_id], cli_env)
        status = status_json(job_id, cli_env)
    finally:
        _kill_host(home, job_id, 1, signal.SIGCONT)
    assert (status["state"], status["exit_code"]) == ("FAILED", 75), status
    assert status["failure_class"]["class"] == "host_lost"
    assert_nothing_running(job_id)


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_the_master_host_killed_is_replaced_and_the_job_goes_on(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    job = _submit(tmp_path, cli_env, "0:0=sleep,0:1=sleep", max_restarts=2, restart_on="always")
    job_id = submit_started(job, tmp_path, cli_env, home)
    _kill_host(home, job_id, 0, signal.SIGKILL)  # the coordinator goes with it
    ma_submit(["wait", job_id], cli_env)
    status = status_json(job_id, cli_env)
    assert status["state"] == "SUCCEEDED", status
    # host 1 lost its coordinator, joined the replaced master's new one and both ran the next attempt
    assert (tmp_path / "marks" / "started-h0-a1").exists() and (tmp_path / "marks" / "started-h1-a1").exists()
    console = (home / "jobs" / job_id / "hosts" / "1" / "console.log").read_text()
    assert "lost the job's coordinator" in console
    assert_nothing_running(job_id)
