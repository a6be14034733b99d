"""A real DDP job (pytorch/examples ``multigpu_torchrun.py``'s structure) where rank 1 ``sys.exit(7)``: its
peer fails in gloo ("Connection closed by peer"). Rank 1's interpreter may outlive its peer's abort, so the shim
may see the peer die first (on a busy machine, often). That worst case is forced in every run: rank 1 closes its
process group and exits only once its peer's process is dead (``DDP_FAIL_AFTER_PEER``). The root cause must be
rank 1, with its exit 7, the peer's death set aside for its evidence (issue 16.1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

import pytest
from shimutil import MARK, SCRIPTS, assert_nothing_left, free_port, marked_env, shim, write_v10_table

pytestmark = [pytest.mark.process, pytest.mark.torch]


def _env(method: str, tmp_path: Path) -> Dict[str, str]:
    (tmp_path / "pids").mkdir()
    extra = {"DDP_FAIL_RANK": "1", "DDP_FAIL_CODE": "7", "MALAUNCH_GRACE_PERIOD": "10",
             "DDP_FAIL_AFTER_PEER": str(tmp_path / "pids"), "MALAUNCH_LOG_DIR": str(tmp_path / "logs")}  # fmt: skip
    if method == "torchrun":
        extra.update({"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2",
                      "MA_TORCHRUN_MASTER_PORT": str(free_port())})  # fmt: skip
    else:
        write_v10_table(tmp_path / "table.json", servers=1, devices=2)
        extra.update(RANK_TABLE_FILE=str(tmp_path / "table.json"), MALAUNCH_MASTER_PORT=str(free_port()))
    return marked_env(extra)


@pytest.mark.parametrize("method", ["torchrun", "ranktable"])
def test_rank_exiting_7_is_the_root_cause_not_its_gloo_peer(tmp_path: Path, method: str) -> None:
    env = _env(method, tmp_path)
    done = shim([str(SCRIPTS / "multigpu_torchrun.py"), "3", "1"], env, tmp_path)
    cause = json.loads((tmp_path / "logs" / "report.json").read_text())["root_cause"]
    assert cause["rank"] == 1, (cause, done.stderr[-3000:])
    assert "[rank 1] failing on purpose at epoch 1" in cause["tail"], cause["tail"]
    assert cause["exit_code"] == 7, cause  # (it ends at once, without the teardown that may turn 7 into SIGABRT)
    assert done.returncode == cause["exit_code"], done.stderr[-3000:]
    assert cause["why"].startswith("rank 0 failed after a peer: "), cause["why"]  # it was seen dead first
    assert_nothing_left(env[MARK])
