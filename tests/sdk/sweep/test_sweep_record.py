"""A sweep's record stays true (issue 29): ``sweep stop`` on a sweep that has ended changes nothing, and a trial
whose job the platform created just before the sweep's driver was SIGKILLed is still tracked (its intent was
recorded first), so ``sweep status`` shows it and ``sweep stop`` stops it. Real sweeps of real local jobs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict

import pytest
from sdkutil import CLI_TIMEOUT, REPO, job_ids, ma_submit, write_job

pytestmark = pytest.mark.process


def record_of(home: Path) -> Dict[str, object]:
    (folder,) = (home / "sweeps").iterdir()
    data: Dict[str, object] = json.loads((folder / "sweep.json").read_text())
    return data


def test_stopping_an_ended_sweep_changes_nothing(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, cleanup_jobs: None
) -> None:
    job = write_job(tmp_path / "job", "import sys\nprint(sys.argv[1:])\n", name="tiny", args=["{x}"])
    ran = ma_submit(["sweep", str(job), "--param", "x=1,2"], cli_env)
    assert ran.returncode == 0, ran.stderr
    before = record_of(home)
    assert before["stopped"] is None and all(t["state"] == "SUCCEEDED" for t in before["trials"])  # type: ignore
    stopped = ma_submit(["sweep", "stop", str(before["id"])], cli_env)
    assert stopped.returncode == 0, stopped.stderr
    assert record_of(home) == before  # not "stopped: stopped by the user"
    status = ma_submit(["sweep", "status", str(before["id"])], cli_env)
    assert "stopped" not in status.stdout, status.stdout


# Submits a sweep whose first trial's job is created for real, then SIGKILLs itself before the sweep can record
# anything more: what a driver killed between the platform's create and its next save leaves behind.
KILLED_SUBMITTER = """
    import os, signal, sys
    from malaunch.sdk.backends.local.backend import LocalBackend
    from malaunch.sdk.sweep import Sweep

    class KilledAfterCreate(LocalBackend):
        def execute(self, plan):
            handle = super().execute(plan)
            os.kill(os.getpid(), signal.SIGKILL)
            return handle

    Sweep.from_yaml(sys.argv[1], params={"x": [1, 2]}, max_parallel=1).submit(
        KilledAfterCreate(home=sys.argv[2]), driver=False
    )
"""


def test_a_trial_created_just_before_the_driver_was_killed_is_tracked_and_stopped(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, cleanup_jobs: None
) -> None:
    job = write_job(tmp_path / "job", "import sys, time\nprint(sys.argv[1:], flush=True)\ntime.sleep(600)\n",
                    name="tiny", args=["{x}"])  # fmt: skip
    killed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KILLED_SUBMITTER), str(job), str(home)],
        env=cli_env, cwd=str(REPO), capture_output=True, text=True, timeout=CLI_TIMEOUT,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (job_id,) = job_ids(home)  # the platform (here: the local backend) has the job
    record = record_of(home)
    trial = record["trials"][0]  # type: ignore[index]
    assert trial["job_id"] == job_id, trial
    status = ma_submit(["sweep", "status", str(record["id"])], cli_env)
    assert status.returncode == 0 and job_id in status.stdout, (status.stdout, status.stderr)
    stopped = ma_submit(["sweep", "stop", str(record["id"])], cli_env)
    assert stopped.returncode == 0, stopped.stderr
    job_status = ma_submit(["status", "--output", "json", job_id], cli_env)
    assert json.loads(job_status.stdout)["state"] == "STOPPED", job_status.stdout
    after = record_of(home)["trials"]
    assert [t["state"] for t in after] == ["STOPPED", "SKIPPED"], after  # type: ignore[union-attr]
    assert os.listdir(home / "jobs") == [job_id]  # no second job for the first trial


KILLED_BEFORE_CREATE = KILLED_SUBMITTER.replace(
    "handle = super().execute(plan)\n            os.kill(os.getpid(), signal.SIGKILL)",
    "os.kill(os.getpid(), signal.SIGKILL)\n            handle = super().execute(plan)",
)


def test_a_trial_whose_job_was_never_created_is_not_left_pending(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, cleanup_jobs: None
) -> None:
    assert KILLED_BEFORE_CREATE != KILLED_SUBMITTER
    job = write_job(tmp_path / "job", "print('hi')\n", name="tiny", args=["{x}"])
    killed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KILLED_BEFORE_CREATE), str(job), str(home)],
        env=cli_env, cwd=str(REPO), capture_output=True, text=True, timeout=CLI_TIMEOUT,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert job_ids(home) == []  # killed before the job was made
    record = record_of(home)
    assert record["trials"][0]["job_id"] is not None  # type: ignore[index]  # the intent was recorded
    stopped = ma_submit(["sweep", "stop", str(record["id"])], cli_env)
    assert stopped.returncode == 0, stopped.stderr
    after = record_of(home)["trials"]
    assert [(t["state"], t["job_id"]) for t in after] == [("SKIPPED", None), ("SKIPPED", None)], after  # type: ignore
    assert job_ids(home) == []
