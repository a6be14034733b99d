"""A real multi-host DDP job (pytorch/examples' DDP tutorial structure, ``multigpu_torchrun.py``): 2 emulated
hosts x 2 ranks under torchrun, rank 3 ``sys.exit(7)`` at the start of epoch 1. Its peers then fail in gloo
(``Connection closed by peer``) and may abort while rank 3's interpreter is still winding down (on a busy
machine, often), so a peer can be seen to die first. That worst case is forced in every run: rank 3 shuts its
connections down and exits only once a peer's process is dead (``DDP_FAIL_AFTER_PEER``). The job's root cause
must still be rank 3, exit 7 (issue 29.2): a death whose log says a peer failed does not outrank a death without
such evidence up to ``PEER_WINDOW`` seconds after it, and the hosts hold their end as long."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Dict

import pytest
from sdkutil import job_ids, ma_submit, write_job
from shimutil import SCRIPTS  # the shim tests' helpers: the DDP script

pytestmark = [pytest.mark.process, pytest.mark.torch, pytest.mark.usefixtures("cleanup_jobs")]


def test_rank_3_exiting_7_is_the_root_cause_of_a_two_host_job(
    home: Path, cli_env: Dict[str, str], tmp_path: Path
) -> None:
    code = tmp_path / "code"
    (tmp_path / "pids").mkdir()
    job = write_job(
        code, "", name="ddp-peer", run_method="torchrun", boot_file="multigpu_torchrun.py", args=["3", "1"],
        resources={"hosts": 2, "devices_per_host": 2},
        env={"DDP_FAIL_RANK": "3", "DDP_FAIL_CODE": "7", "DDP_FAIL_AFTER_PEER": str(tmp_path / "pids"),
             "OMP_NUM_THREADS": "1"},
        launcher={"grace_period": 10},
    )  # fmt: skip
    shutil.copy(SCRIPTS / "multigpu_torchrun.py", code / "multigpu_torchrun.py")
    done = ma_submit([str(job)], cli_env)
    assert done.returncode == 7, done.stderr[-3000:]
    (job_id,) = job_ids(home)
    report = json.loads((home / "jobs" / job_id / "hosts" / "1" / "report.json").read_text())
    cause = report["root_cause"]
    assert (cause["rank"], cause["exit_code"]) == (3, 7), (cause, done.stderr[-3000:])
    assert "[rank 3] failing on purpose at epoch 1" in cause["tail"], cause["tail"]
    assert "rank 3 on host 1 (127.0.0.2) exited with 7; class user_error" in done.stderr, done.stderr[-3000:]
    assert " failed after a peer: " in cause["why"], cause  # a peer was seen dead first
