"""Checkpoints through the local backend with two hosts (issue 39): real runner, real shims, torchrun with gloo.

The job file's ``checkpoint:`` section gives both hosts one folder under the job's folder; a rank of host 1
killed mid-run restarts the job in place (the coordinator decides), every rank resumes from the newest complete
checkpoint, and the final weights equal, byte for byte, those of the same job without a failure.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import yaml
from sdkutil import assert_nothing_running, job_ids, ma_submit

pytestmark = [pytest.mark.process, pytest.mark.torch]

SCRIPTS = Path(__file__).resolve().parents[2] / "entrypoint" / "scripts"
TOTAL, EVERY = 12, 3


def _job(tmp_path: Path, cli_env: Dict[str, str], home: Path, fault: str) -> Tuple[Dict[str, str], List[int], str]:
    out = tmp_path / f"out-{fault.replace(':', '-')}"
    out.mkdir()
    job = tmp_path / f"job-{out.name}.yaml"
    job.write_text(yaml.safe_dump({
        "name": "ckpt", "run_method": "torchrun", "code_dir": str(SCRIPTS), "boot_file": "ckpt_train.py",
        "args": [str(out), str(TOTAL), str(EVERY), fault], "resources": {"hosts": 2, "devices_per_host": 1},
        "env": {"OMP_NUM_THREADS": "1", "MALAUNCH_RESTART_BACKOFF": "0.2"}, "checkpoint": {"keep": 2},
        "launcher": {"max_restarts": 2, "grace_period": 3},
    }))  # fmt: skip
    before = set(job_ids(home))
    done = ma_submit([str(job)], cli_env, timeout=600)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    (job_id,) = set(job_ids(home)) - before
    assert_nothing_running(job_id)
    trained = [json.loads(line)["step"] for line in (out / "trained-0.jsonl").read_text().splitlines()]
    final: Dict[str, str] = json.loads((out / "final.json").read_text())
    logs = "\n".join(ma_submit(["logs", job_id], cli_env).stdout.splitlines())
    return final, trained, logs + done.stderr + done.stdout


@pytest.mark.usefixtures("cleanup_jobs")
def test_two_hosts_a_rank_killed_mid_run_resumes_bit_for_bit(tmp_path: Path, cli_env: Dict[str, str],
                                                             home: Path) -> None:  # fmt: skip
    reference, trained, _ = _job(tmp_path, cli_env, home, "none")
    assert trained == list(range(1, TOTAL + 1))
    final, trained, text = _job(tmp_path, cli_env, home, "run:1:8")
    assert final == reference
    assert sum(count - 1 for count in Counter(trained).values()) <= EVERY  # none: killed just after a save
    assert "attempt 1 resumes from " in text and "step-00000006 (step 6" in text, text[-3000:]
    assert "MALAUNCH_RESUME_FROM=" in text and "/checkpoints/step-00000006" in text
