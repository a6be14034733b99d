"""Progress and the time to recover through the local backend (issue 39): real runner, real shims, real ranks.

A rank reports its steps with ``checkpoint.progress()`` (no ``checkpoint:`` section); ``ma-submit status`` says the
job's step, rate and time left and, after a rank was killed, the four times of its recovery; ``ma-submit top``
says each rank's step. With two hosts (torchrun) whose host 1 is killed and replaced, host 0's report has the
job's recovery record, its four times in order, and ``status`` prints them.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Any, Dict, List

import pytest
from malaunch.entrypoint.public import descendants, env_has, read_environ
from sdkutil import assert_nothing_running, job_ids, ma_submit, wait_for, write_job

pytestmark = pytest.mark.process

SCRIPT = (Path(__file__).resolve().parents[2] / "entrypoint" / "scripts" / "progress_steps.py").read_text()
TIMES = ("failure_seen", "last_rank_gone", "next_started", "first_progress")
CLOCK = r"\d\d:\d\d:\d\d\.\d\d\d UTC"


def _records(home: Path, job_id: str, host: int) -> List[Dict[str, Any]]:
    folder = home / "jobs" / job_id / "hosts" / str(host) / "logs" / "progress.d"
    found = []
    for path in sorted(folder.glob("rank-*.json")) if folder.is_dir() else []:
        try:
            found.append(json.loads(path.read_text()))
        except ValueError:  # being replaced: read again at the next look
            continue
    return found


def _reached(home: Path, job_id: str, hosts: int, attempt: str, step: int) -> bool:
    return all(any(r["attempt"] == attempt and r["step"] >= step for r in _records(home, job_id, host))
               for host in range(hosts))  # fmt: skip


def _recovery_lines(text: str, attempt: int = 0) -> List[str]:
    lines = text.splitlines()
    start = lines.index(f"recovery after attempt {attempt}:")
    return lines[start + 1 : start + 5]


def _check_recovery_text(lines: List[str]) -> None:
    assert re.fullmatch(rf"  attempt 0 failure seen    {CLOCK}", lines[0]), lines
    for line, label in zip(lines[1:], ("last rank gone          ", "attempt 1 started       ",
                                       "attempt 1 first progress")):  # fmt: skip
        assert re.fullmatch(rf"  {label}  {CLOCK} \(\+\d+\.\d\d s\)", line), lines


@pytest.mark.usefixtures("cleanup_jobs")
def test_status_and_top_show_the_step_rate_time_left_and_the_recovery(tmp_path: Path, cli_env: Dict[str, str],
                                                                      home: Path) -> None:  # fmt: skip
    hold = tmp_path / "hold"
    job = write_job(tmp_path / "job", SCRIPT, name="prog", args=["5", "40"], launcher={"max_restarts": 1,
                    "grace_period": 3}, env={"HOLD_FILE": str(hold), "STEP_PACE": "0.1", "FAIL_RANK": "0",
                    "FAIL_STEP": "3", "MALAUNCH_RESTART_BACKOFF": "0.2"})  # fmt: skip
    assert ma_submit(["--detach", str(job)], cli_env).returncode == 0
    (job_id,) = job_ids(home)
    wait_for(lambda: _reached(home, job_id, 1, "1.0", 5), 120, "attempt 1's step 5")
    status = ma_submit(["status", job_id], cli_env).stdout
    (line,) = [line for line in status.splitlines() if line.startswith("progress:")]
    assert re.fullmatch(r"progress:  step 5 of 40 \(1 rank of attempt 1\), \d+\.\d\d steps/s, about \d+ s left, "
                        r"recorded \d+ s ago", line), status  # fmt: skip
    _check_recovery_text(_recovery_lines(status))
    top = ma_submit(["top", job_id], cli_env).stdout.splitlines()
    header = top.index("RANK  HOST  STEP  RATE          ATTEMPT")
    assert re.fullmatch(r"0     0     5/40  \d+\.\d\d steps/s  1", top[header + 1]), top
    data = json.loads(ma_submit(["status", "--output", "json", job_id], cli_env).stdout)
    assert (data["progress"]["step"], data["progress"]["total"], data["progress"]["attempt"]) == (5, 40, "1.0")
    hold.write_text("")
    assert ma_submit(["wait", job_id], cli_env).returncode == 0
    ended = ma_submit(["status", job_id], cli_env).stdout
    assert re.search(r"^progress:  step 5 of 40 \(1 rank of attempt 1\), the last recorded \d+ s ago$", ended, re.M)
    _check_recovery_text(_recovery_lines(ended))
    (record,) = json.loads((home / "jobs" / job_id / "hosts" / "0" / "report.json").read_text())["recovery"]
    times = [record[name] for name in TIMES]
    assert None not in times and times == sorted(times), record
    assert_nothing_running(job_id)


def _kill_host(home: Path, job_id: str, index: int) -> None:
    """SIGKILL host ``index``'s shim and what runs under it (a pod that dies), each proven the job's."""
    state = json.loads((home / "jobs" / job_id / "state.json").read_text())
    root = state["hosts"][index]["pid"]
    for pid in [root] + [info.pid for info in descendants(root)]:
        environ = read_environ(pid)
        if environ is not None and env_has(environ, "MALAUNCH_JOB_ID", job_id):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.torch
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_host_killed_host_0_reports_the_jobs_recovery_and_status_prints_it(tmp_path: Path,
                                                                             cli_env: Dict[str, str],
                                                                             home: Path) -> None:  # fmt: skip
    hold = tmp_path / "hold"
    job = write_job(tmp_path / "job", SCRIPT, name="lost", args=["4", "40"], run_method="torchrun",
                    resources={"hosts": 2, "devices_per_host": 1},
                    launcher={"max_restarts": 1, "grace_period": 3, "heartbeat_timeout": 3, "host_wait": 60},
                    env={"HOLD_FILE": str(hold), "STEP_PACE": "0.1", "MALAUNCH_RESTART_BACKOFF": "0.2",
                         "OMP_NUM_THREADS": "1"})  # fmt: skip
    assert ma_submit(["--detach", str(job)], cli_env).returncode == 0
    (job_id,) = job_ids(home)
    wait_for(lambda: _reached(home, job_id, 2, "0.0", 4), 180, "attempt 0's step 4 on both hosts")
    _kill_host(home, job_id, 1)
    wait_for(lambda: _reached(home, job_id, 2, "1.0", 4), 180, "attempt 1's step 4 on both hosts")
    status = ma_submit(["status", job_id], cli_env).stdout
    assert re.search(r"^progress:  step 4 of 40 \(2 ranks of attempt 1\), ", status, re.M), status
    _check_recovery_text(_recovery_lines(status))
    hold.write_text("")
    done = ma_submit(["wait", job_id], cli_env)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((home / "jobs" / job_id / "hosts" / "0" / "report.json").read_text())
    (record,) = report["recovery"]
    times = [record[name] for name in TIMES]
    assert None not in times and times == sorted(times), record
    assert "None" not in record["line"]
    _check_recovery_text(_recovery_lines(ma_submit(["status", job_id], cli_env).stdout))
    assert_nothing_running(job_id)
