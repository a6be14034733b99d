"""The uploaded code really runs: the fake platform downloads the job's code from moto's OBS and runs each
node's ``algorithm.command`` (the shim, then torchrun) as processes on 127.0.0.1/127.0.0.2, so a 2-host torchrun
job submitted with ``backend: modelarts`` does a real gloo all_reduce, and a failing rank's own exit code comes
back through the platform's ``task_statuses`` as ``ma-submit``'s exit code, with the failure class the shim
printed in that node's log."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml
from fake_modelarts import FakeModelArts
from modelarts_env import BUCKET
from sdkutil import TEMPLATES, ma_submit

pytestmark = [pytest.mark.process, pytest.mark.torch]

FLAVOR = "test.cpu.2procs"
FAIL_ON_RANK_3 = (
    "import os, sys\nprint('rank', os.environ['RANK'], flush=True)\nsys.exit(3 if os.environ['RANK'] == '3' else 0)\n"
)


def job_file(folder: Path, boot: str, args: Any) -> Path:
    code = folder / "code"
    code.mkdir(parents=True)
    shutil.copy(TEMPLATES / "torchrun-ddp" / "train.py", code / "train.py")
    (code / "fail.py").write_text(FAIL_ON_RANK_3)
    data: Dict[str, Any] = {
        "name": "ddp-real",
        "backend": "modelarts",
        "run_method": "torchrun",
        "code_dir": "code",
        "boot_file": boot,
        "args": args,
        "image": "local/malaunch:test",
        "resources": {"hosts": 2, "flavor": FLAVOR},
        "env": {"OMP_NUM_THREADS": "1"},
        "launcher": {"grace_period": 10},
        "modelarts": {"obs_dir": f"obs://{BUCKET}/runs/"},
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def running_platform(fake_ma: FakeModelArts, s3: Any, tmp_path: Path) -> FakeModelArts:
    fake_ma.run_nodes = (s3, tmp_path / "platform", {FLAVOR: 2})
    return fake_ma


def test_two_host_torchrun_all_reduce(running_platform: FakeModelArts, tmp_path: Path, ma_env: Dict[str, str]) -> None:
    result = ma_submit([str(job_file(tmp_path, "train.py", ["--expect-world-size", "4"]))], ma_env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert any(line.startswith("[host 0 rank 0] ") and "all_reduce OK across 4 ranks" in line for line in lines), lines
    assert any(line.startswith("[host 1 rank ") and "all_reduce sum = 10" in line for line in lines), lines
    assert running_platform.signature_failures == [] and running_platform.body_errors == []


def test_a_failing_rank_exit_code_comes_back(
    running_platform: FakeModelArts, tmp_path: Path, ma_env: Dict[str, str]
) -> None:
    result = ma_submit([str(job_file(tmp_path, "fail.py", []))], ma_env)
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:]
    (job,) = running_platform.jobs.values()
    # host 1 failed with its rank's code; host 0 ends with the job's code (the hosts' coordinator ended its attempt)
    # unless the platform terminated it first
    assert job.containers is not None and job.containers.exit_codes() in ([3, 3], [143, 3])
    # either task may end first: both carry the job's code, and their shims name the same root cause
    assert re.search(r"task worker-[01] exited with code 3", result.stderr), result.stderr[-2000:]
    # the class: the real shim's verdict in worker-1's log says the script's own exit 3 is the user's error
    # (the exit code alone would read as the shim rejecting its input)
    status = ma_submit(["status", "--output", "json", job.id], ma_env)
    data = json.loads(status.stdout)
    assert (data["exit_code"], data["failure_class"]["class"], data["failure_class"]["retryable"]) == (
        3,
        "user_error",
        False,
    ), status.stderr
