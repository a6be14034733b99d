"""A job stopped during the back-off between two attempts (local backend, two hosts, real shims): what each host's
line in ``status`` says. The shims were stopped, after an attempt that failed for its own root cause: each line
says the stop, then that attempt's root cause with that attempt's own class, never the job's class ``stopped``
pinned on a rank's SIGKILL, and never the code 3 a surviving host's shim ended its attempt with as a root cause."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from sdkutil import assert_nothing_running, job_ids, ma_submit, wait_for, write_job

JOB = """
    import os, signal, time
    rank, attempt = int(os.environ["RANK"]), int(os.environ["MALAUNCH_ATTEMPT"])
    print(f"rank {rank} attempt {attempt} starts", flush=True)
    if rank == 1 and attempt == 0:
        time.sleep(1)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(120)
"""


def _attempt_state(home: Path, job_id: str, host: int) -> str:
    try:
        data: Dict[str, Any] = json.loads((home / "jobs" / job_id / "hosts" / str(host) / "logs" / "attempt.json")
                                          .read_text())  # fmt: skip
    except (OSError, ValueError):
        return ""
    return str(data.get("state"))


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_job_stopped_in_the_back_off_says_the_stop_and_the_attempts_own_cause(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    job = write_job(tmp_path / "job", JOB, name="backoff", run_method="ranktable",
                    resources={"hosts": 2, "devices_per_host": 1}, env={"MALAUNCH_RESTART_BACKOFF": "60"},
                    launcher={"max_restarts": 2, "grace_period": 5})  # fmt: skip
    submitted = ma_submit(["--detach", str(job)], cli_env)
    assert submitted.returncode == 0, submitted.stderr
    (job_id,) = job_ids(home)
    wait_for(lambda: all(_attempt_state(home, job_id, host) == "backoff" for host in (0, 1)), 90,
             "both hosts in the back-off after attempt 0")  # fmt: skip
    stopped = ma_submit(["stop", job_id], cli_env)
    assert stopped.returncode == 0, stopped.stderr
    status = ma_submit(["status", "--output", "json", job_id], cli_env)
    assert status.returncode == 0, status.stderr
    hosts = {host["index"]: host["detail"] for host in json.loads(status.stdout)["hosts"]}
    log = home / "jobs" / job_id / "hosts" / "1" / "logs" / "attempt-0" / "rank-1.log"
    assert hosts[1] == ("shim stopped by SIGTERM during the back-off after attempt 0; attempt 0's root cause rank 1 "
                        f"on host 127.0.0.2 killed by SIGKILL (exit 137); class signal; log {log}"), hosts[1]
    assert hosts[0].startswith("shim stopped by SIGTERM during the back-off after attempt 0; attempt 0's root "
                               "cause host 1 (127.0.0.2) failed; class "), hosts[0]  # fmt: skip
    assert "another host" not in hosts[0] and "exited with 3" not in hosts[0]
    assert_nothing_running(job_id)
