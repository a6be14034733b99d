"""A real multi-host DDP job (pytorch/examples' DDP tutorial structure, ``multigpu_torchrun.py``) on a busy
machine: 2 emulated hosts x 2 ranks under torchrun, rank 3 ``sys.exit(7)`` at the start of epoch 1. Its peer
rank 2 then fails in gloo (``Connection closed by peer``) and may abort while rank 3's interpreter is still
winding down, so rank 2 can be seen to die first. The job's root cause must still be rank 3, exit 7, in every
run (issue 29.2): a death whose log says a peer failed does not outrank a death without such evidence up to
``PEER_WINDOW`` seconds after it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Dict

import pytest
from sdkutil import job_ids, ma_submit, write_job
from shimutil import SCRIPTS, CpuHog  # the shim tests' helpers: the DDP script and the CPU hog

pytestmark = [pytest.mark.process, pytest.mark.torch, pytest.mark.usefixtures("cleanup_jobs")]
RUNS = 3  # a bounded number of runs on a shared machine


@pytest.mark.parametrize("run", range(RUNS))
def test_rank_3_exiting_7_is_the_root_cause_of_a_two_host_job(
    home: Path, cli_env: Dict[str, str], tmp_path: Path, run: int
) -> None:
    code = tmp_path / "code"
    job = write_job(
        code, "", name="ddp-peer", run_method="torchrun", boot_file="multigpu_torchrun.py", args=["3", "1"],
        resources={"hosts": 2, "devices_per_host": 2},
        env={"DDP_FAIL_RANK": "3", "DDP_FAIL_CODE": "7", "OMP_NUM_THREADS": "1"},
        launcher={"grace_period": 10},
    )  # fmt: skip
    shutil.copy(SCRIPTS / "multigpu_torchrun.py", code / "multigpu_torchrun.py")
    with CpuHog(2):
        done = ma_submit([str(job)], cli_env)
    assert done.returncode == 7, done.stderr[-3000:]
    (job_id,) = job_ids(home)
    report = json.loads((home / "jobs" / job_id / "hosts" / "1" / "report.json").read_text())
    cause = report["root_cause"]
    assert (cause["rank"], cause["exit_code"]) == (3, 7), (cause, done.stderr[-3000:])
    assert "[rank 3] failing on purpose at epoch 1" in cause["tail"], cause["tail"]
    assert "rank 3 on host 1 (127.0.0.2) exited with 7; class user_error" in done.stderr, done.stderr[-3000:]
