"""Elastic torchrun through the local backend (issue 26 §2): the template's training, 2 hosts, ``min_hosts: 1``.
Host 1 lost for good -> host 0 goes on alone (world size 1, resumed from its checkpoint); host 1 back -> world
size 2 again, and the job succeeds. Real runner, real shims, real torchrun with gloo."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Dict, List

import pytest
import yaml
from malaunch.entrypoint.public import descendants, env_has, read_environ
from malaunch.sdk.backends.local.backend import LocalBackend
from sdkutil import TEMPLATES, assert_nothing_running, job_ids, ma_submit, wait_for

pytestmark = pytest.mark.process

_EPOCH = re.compile(r"epoch (\d+)/\d+: world size (\d+)")


def _worlds(home: Path, job_id: str) -> List[int]:
    """The world size of each epoch rank 0 reported, in order (the rendezvous puts rank 0 on either host: the
    hosts' consoles merged by time)."""
    text = "\n".join(LocalBackend(home=str(home)).logs(job_id))
    return [int(match.group(2)) for match in _EPOCH.finditer(text)]


def _submit(tmp_path: Path, cli_env: Dict[str, str], home: Path, epochs: int) -> str:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "name": "elastic", "run_method": "torchrun", "code_dir": str(TEMPLATES / "torchrun-ddp"),
        "boot_file": "train.py", "args": ["--epochs", str(epochs), "--epoch-seconds", "0.5"],
        "resources": {"hosts": 2, "devices_per_host": 1}, "env": {"OMP_NUM_THREADS": "1"}, "checkpoint": {},
        "launcher": {"min_hosts": 1, "grace_period": 3, "heartbeat_timeout": 3, "host_wait": 3},
    }))  # fmt: skip
    submitted = ma_submit(["--detach", str(job)], cli_env)
    assert submitted.returncode == 0, submitted.stderr
    (job_id,) = job_ids(home)
    wait_for(lambda: 2 in _worlds(home, job_id), 120, "an epoch with world size 2")
    return job_id


@pytest.mark.usefixtures("cleanup_jobs")
def test_a_host_killed_from_outside_and_not_replaced_leaves_the_job_going_on(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    """No restarts to replace it with (max_restarts 0): the runner does not end the elastic job with the dead
    host's 137; host 0 goes on alone and the job succeeds."""
    job_id = _submit(tmp_path, cli_env, home, 30)
    root = LocalBackend(home=str(home)).status(job_id).hosts[1].pid
    assert root is not None
    for pid in [root] + [info.pid for info in descendants(root)]:  # the pod dies: its whole tree
        environ = read_environ(pid)
        if environ is not None and env_has(environ, "MALAUNCH_JOB_ID", job_id):
            os.kill(pid, signal.SIGKILL)
    done = ma_submit(["wait", job_id], cli_env)
    status = json.loads(ma_submit(["status", "--output", "json", job_id], cli_env).stdout)
    assert (status["state"], status["exit_code"]) == ("SUCCEEDED", 0), (done.stdout[-3000:], status)
    assert 1 in _worlds(home, job_id)
    events = json.loads(ma_submit(["events", "--output", "json", job_id], cli_env).stdout)
    assert ("host 1", "HostLost") in [(event["source"], event["reason"]) for event in events]
    assert_nothing_running(job_id)


@pytest.mark.usefixtures("cleanup_jobs")
def test_a_host_lost_for_good_leaves_the_survivor_alone_and_its_return_makes_two_again(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    job_id = _submit(tmp_path, cli_env, home, 80)
    backend = LocalBackend(home=str(home))
    backend.lose_host(job_id, 1)
    wait_for(lambda: 1 in _worlds(home, job_id), 120, "host 0 going on alone (world size 1)")
    assert backend.status(job_id).state.value == "RUNNING"
    backend.restore_host(job_id, 1)
    wait_for(lambda: _worlds(home, job_id)[-1:] == [2] and 1 in _worlds(home, job_id), 120, "world size 2 again")
    done = ma_submit(["wait", job_id], cli_env)
    status = json.loads(ma_submit(["status", "--output", "json", job_id], cli_env).stdout)
    assert (status["state"], status["exit_code"]) == ("SUCCEEDED", 0), (done.stdout[-3000:], status)
    worlds = _worlds(home, job_id)
    first_one = worlds.index(1)
    assert set(worlds[:first_one]) == {2} and 2 in worlds[first_one:], worlds
    logs = ma_submit(["logs", job_id], cli_env).stdout
    assert "resumed at epoch" in logs and "all_reduce OK across 2 ranks" in logs, logs[-3000:]
    epochs = [int(match.group(1)) for match in _EPOCH.finditer(logs)]
    # Every epoch trained: each one printed, or, when its rank was torn down between its checkpoint and its line
    # (the template saves, then prints), the next attempt resumed right after it ("resumed at epoch 3" follows a
    # complete step-3: epochs 1 to 3 are done). Nothing was skipped without its checkpoint.
    missing = sorted(set(range(1, 81)) - set(epochs))
    assert all(f"resumed at epoch {epoch} from" in logs for epoch in missing), (missing, logs[-3000:])
    events = json.loads(ma_submit(["events", "--output", "json", job_id], cli_env).stdout)
    reasons = [(event["source"], event["reason"]) for event in events]
    assert ("host 1", "HostLost") in reasons and ("host 1", "HostBack") in reasons, reasons
    changes = [event["message"] for event in events if event["reason"] == "HostsChanged"]
    assert any("world size 1" in text for text in changes) and any("world size 2" in text for text in changes), changes
    restarts = [event["message"] for event in events if event["reason"] == "Restarted"]
    assert restarts and all("change of hosts" in text and "user_error" not in text for text in restarts), restarts
    assert_nothing_running(job_id)
