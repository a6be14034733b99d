"""``stop`` never signals a stranger: pids in a job's state file are signalled only when proven to be the job's
(its id in their environment, same start time), whatever the file says."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.backends.local.jobdir import is_job_process, signal_job_process
from malaunch.sdk.backends.local.state import new_state

TRAP = (
    "import signal, sys, time\n"
    "def hit(n, f):\n"
    "    open(sys.argv[1], 'a').write(str(n) + '\\n')\n"
    "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
    "    signal.signal(s, hit)\n"
    "print('up', flush=True)\n"
    "time.sleep(120)\n"
)


def _stranger(path: Path, env_extra: dict) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", TRAP, str(path)], env={**os.environ, **env_extra},
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "up\n"
    return proc


@pytest.mark.process
@pytest.mark.parametrize("runner", ["init", "foreign"])
def test_stop_signals_no_foreign_pid_from_the_state_file(tmp_path: Path, runner: str) -> None:
    job_id = f"job-{uuid.uuid4().hex[:12]}"
    foreign = _stranger(tmp_path / "foreign.hits", {})
    other_job = _stranger(tmp_path / "other.hits", {"MALAUNCH_JOB_ID": f"other-{uuid.uuid4().hex}"})
    try:
        job_dir = tmp_path / "home" / "jobs" / job_id
        job_dir.mkdir(parents=True)
        hosts = [{"index": i, "address": f"127.0.0.{i + 1}", "log_file": str(job_dir / f"h{i}.log")} for i in (0, 1)]
        state = new_state(job_id, "stranger", time.time(), hosts)
        state["state"] = "RUNNING"
        state["runner_pid"] = 1 if runner == "init" else foreign.pid
        for host, proc in zip(state["hosts"], (foreign, other_job)):
            host.update(state="RUNNING", pid=proc.pid)
        (job_dir / "state.json").write_text(json.dumps(state))
        (job_dir / "plan.json").write_text(json.dumps({"request": {"grace_period": 1.0, "hosts": []}}))
        status = LocalBackend(home=str(tmp_path / "home"), network="loopback").stop(job_id)
        if runner == "foreign":  # a valid state whose runner is gone: the job ends STOPPED
            assert status.state.is_terminal, status
        else:  # runner_pid 1 is a damaged state: shown as UNKNOWN with its reason, still nothing signalled
            assert status.state.value in ("UNKNOWN", "STOPPED"), status
        time.sleep(0.5)  # a signal, had one been sent, has been handled by now
        for proc, hits in ((foreign, "foreign.hits"), (other_job, "other.hits")):
            assert proc.poll() is None, "a stranger was killed"
            assert not (tmp_path / hits).exists(), f"a stranger was signalled: {(tmp_path / hits).read_text()}"
        assert not is_job_process(1, job_id) and not is_job_process(foreign.pid, job_id)
        assert not signal_job_process(foreign.pid, job_id, signal.SIGTERM)
    finally:
        for proc in (foreign, other_job):
            proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
