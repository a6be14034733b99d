"""``launcher.prepare`` through the local backend (issue 39 item 4): two hosts, host 1's step holds until the test
lets it go; meanwhile ``status`` says which step host 1 runs and no rank has started; then both hosts' ranks start
together (their own recorded start times) and the job succeeds. A failing step fails the job naming it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from sdkutil import assert_nothing_running, job_ids, ma_submit, wait_for, write_job

SCRIPT = """\
import os, time
started = time.time()
with open(os.path.join(os.environ["MARKS"], "rank-start-%s" % os.environ["VC_TASK_INDEX"]), "w") as handle:
    handle.write(repr(started))
print("trained", flush=True)
"""
#: Host 1's step waits for the test's ``go`` file (its own work, as a download would take); host 0's is quick.
HOLD = 'echo "preparing host $VC_TASK_INDEX"; if [ "$VC_TASK_INDEX" = 1 ]; then while [ ! -e "$MARKS/go" ]; do ' \
       'sleep 0.1; done; fi; date +%s.%N > "$MARKS/prepared-h$VC_TASK_INDEX"'


def _status(job_id: str, cli_env: Dict[str, str]) -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads(ma_submit(["status", "--output", "json", job_id], cli_env).stdout)
    return data


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_two_local_hosts_start_their_ranks_together_once_the_slow_one_prepared_and_status_says_so(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    job = write_job(tmp_path / "job", SCRIPT, name="prep", resources={"hosts": 2},
                    launcher={"prepare": [["sh", "-c", HOLD]], "prepare_timeout": 300},
                    env={"MARKS": str(marks)})  # fmt: skip
    submitted = ma_submit(["--detach", str(job)], cli_env)
    assert submitted.returncode == 0, submitted.stderr
    (job_id,) = job_ids(home)
    wait_for((marks / "prepared-h0").exists, 60, "host 0 prepared")
    seen: Dict[str, Any] = {}

    def says_host_1_prepares() -> bool:
        seen.update(_status(job_id, cli_env))
        return "host 1 (" in seen["pending_reason"] and "running prepare step 1 of 1" in seen["pending_reason"]

    wait_for(says_host_1_prepares, 60, "status naming host 1's prepare step")
    assert not list(marks.glob("rank-start-*"))  # host 0 prepared long ago, and still no rank runs
    (marks / "go").touch()
    ma_submit(["wait", job_id], cli_env)
    status = _status(job_id, cli_env)
    assert status["state"] == "SUCCEEDED", status
    starts = [float((marks / f"rank-start-{host}").read_text()) for host in (0, 1)]
    assert max(starts) - min(starts) < 2.0 and min(starts) >= float((marks / "prepared-h1").read_text())
    logs = ma_submit(["logs", job_id], cli_env).stdout
    assert "[prepare] preparing host 1" in logs and "[prepare] preparing host 0" in logs
    assert_nothing_running(job_id)


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_failing_step_fails_the_local_job_with_its_class_and_code(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    job = write_job(tmp_path / "job", SCRIPT, name="prepfail", resources={"hosts": 2},
                    launcher={"prepare": [["sh", "-c", 'if [ "$VC_TASK_INDEX" = 1 ]; then exit 5; fi']]},
                    env={"MARKS": str(tmp_path)})  # fmt: skip
    done = ma_submit([str(job)], cli_env)
    (job_id,) = job_ids(home)
    status = _status(job_id, cli_env)
    assert (status["state"], status["exit_code"]) == ("FAILED", 5), (status, done.stdout[-2000:])
    assert status["failure_class"]["class"] == "prepare_failed"
    assert not list(tmp_path.glob("rank-start-*"))
    assert_nothing_running(job_id)
