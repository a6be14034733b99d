"""``launcher.prepare`` through the local backend (issue 39 item 4): two hosts, host 1's step holds until the test
lets it go; meanwhile ``status`` says which step host 1 runs and no rank has started; then both hosts' ranks start
together (their own recorded start times) and the job succeeds. A failing step fails the job naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import pytest
from hostjobs import hosts_job, status_json, submit_started
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
        seen.update(status_json(job_id, cli_env))
        return "host 1 (" in seen["pending_reason"] and "running prepare step 1 of 1" in seen["pending_reason"]

    wait_for(says_host_1_prepares, 60, "status naming host 1's prepare step")
    assert not list(marks.glob("rank-start-*"))  # host 0 prepared long ago, and still no rank runs
    (marks / "go").touch()
    ma_submit(["wait", job_id], cli_env)
    status = status_json(job_id, cli_env)
    assert status["state"] == "SUCCEEDED", status
    starts = [float((marks / f"rank-start-{host}").read_text()) for host in (0, 1)]
    assert max(starts) - min(starts) < 2.0 and min(starts) >= float((marks / "prepared-h1").read_text())
    logs = ma_submit(["logs", job_id], cli_env).stdout
    assert "[host 1 prepare] preparing host 1" in logs and "[host 0 prepare] preparing host 0" in logs
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
    status = status_json(job_id, cli_env)
    assert (status["state"], status["exit_code"]) == ("FAILED", 5), (status, done.stdout[-2000:])
    assert status["failure_class"]["class"] == "prepare_failed"
    assert not list(tmp_path.glob("rank-start-*"))
    assert_nothing_running(job_id)


#: Each run of the steps notes its host; the host given back holds its second run until the test lets it go.
AGAIN = 'echo "h$VC_TASK_INDEX" >> "$HOSTS_JOB_DIR/runs"; if [ "$(grep -c "h$VC_TASK_INDEX" "$HOSTS_JOB_DIR/runs")" ' \
        '-gt 1 ]; then while [ ! -e "$HOSTS_JOB_DIR/go" ]; do sleep 0.1; done; fi'


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_host_lost_and_given_back_runs_its_steps_again_and_the_next_attempt_waits_for_them(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    marks = tmp_path / "marks"
    job = hosts_job(tmp_path, "prepback", "0:0=sleep,0:1=sleep", host_wait=60, max_restarts=2, restart_on="always",
                    prepare=[["sh", "-c", AGAIN]])  # fmt: skip
    job_id = submit_started(job, tmp_path, cli_env, home)
    assert ma_submit(["host", "lose", job_id, "1"], cli_env).returncode == 0
    assert ma_submit(["host", "restore", job_id, "1"], cli_env).returncode == 0
    wait_for(lambda: (marks / "runs").read_text().split().count("h1") == 2, 60, "host 1's steps run again")
    wait_for(lambda: "running prepare step 1 of 1" in status_json(job_id, cli_env)["pending_reason"], 30, "status")
    assert not (marks / "started-h0-a1").exists() and not (marks / "started-h1-a1").exists()
    (marks / "go").touch()
    ma_submit(["wait", job_id], cli_env)
    status = status_json(job_id, cli_env)
    assert status["state"] == "SUCCEEDED", status
    assert sorted((marks / "runs").read_text().split()) == ["h0", "h1", "h1"]
    assert (marks / "started-h0-a1").exists() and (marks / "started-h1-a1").exists()
    assert_nothing_running(job_id)
