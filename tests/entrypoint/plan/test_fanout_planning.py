"""Rank-table fan-out planning through the real shim (``--dry-run`` and one real run), with the public sample
tables: no master address needed, template-2 pods in file order when their names carry no distinct numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest
from shimutil import marked_env

pytestmark = pytest.mark.process

DATA = Path(__file__).parents[1] / "data" / "ranktables"


def dry_run(tmp: Path, table: str, extra: Dict[str, str]) -> Dict[str, Any]:
    (tmp / "train.py").write_text("")
    env = marked_env({"MA_RUN_METHOD": "ranktable", "RANK_TABLE_FILE": str(DATA / table), **extra})
    for name in ("VC_WORKER_HOSTS", "MA_VJ_NAME", "MA_TASK_NAME"):
        if name not in extra:
            env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "malaunch.entrypoint", "--dry-run", "train.py"], env=env,
                          cwd=str(tmp), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    plan: Dict[str, Any] = json.loads(done.stdout)
    return plan


def test_multi_host_fan_out_needs_no_master_address(tmp_path: Path) -> None:
    plan = dry_run(tmp_path, "hccl_doc_template1_2x2.json", {"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "1"})
    envs = [proc["env"] for proc in plan["processes"]]
    assert [(env["RANK_ID"], env["DEVICE_ID"]) for env in envs] == [("2", "0"), ("3", "1")]
    assert all("MASTER_ADDR" not in env and "MASTER_PORT" not in env for env in envs)
    assert any("no master address" in note for note in plan["notes"])


def test_master_address_is_passed_when_known(tmp_path: Path) -> None:
    plan = dry_run(tmp_path, "hccl_doc_template1_2x2.json",
                   {"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "0", "VC_WORKER_HOSTS": "host-a,host-b"})
    env = plan["processes"][0]["env"]
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("host-a", "29500")
    assert not any("no master address" in note for note in plan["notes"])


def test_hccl_doc_template_2_pods_follow_the_file_and_the_plan_says_so(tmp_path: Path) -> None:
    plan = dry_run(tmp_path, "hccl_doc_template2_tf_pods.json",
                   {"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "1", "MA_CURRENT_INSTANCE_NAME": "tf-tbdf1"})
    (proc,) = plan["processes"]
    assert (proc["env"]["RANK_ID"], proc["env"]["RANK_SIZE"], proc["env"]["DEVICE_ID"]) == ("1", "2", "0")
    assert any("file" in note and "tf-bae41" in note for note in plan["notes"])
    converted = json.loads(plan["files"][proc["env"]["RANK_TABLE_FILE"]])
    assert [s["server_id"] for s in converted["server_list"]] == ["node_0", "node_1"]


def test_modelzoo_single_instance_table_fans_out_to_its_8_devices(tmp_path: Path) -> None:
    plan = dry_run(tmp_path, "modelzoo_npu8p.json", {"MA_NUM_GPUS": "8"})
    assert [proc["env"]["RANK_ID"] for proc in plan["processes"]] == [str(i) for i in range(8)]
    assert plan["processes"][0]["env"]["MASTER_ADDR"] == "127.0.0.1"  # one host: the master is this host


def test_real_fan_out_of_the_template_2_sample_without_a_master(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import json, os\n"
        "table = json.load(open(os.environ['RANK_TABLE_FILE']))\n"
        "print('rank', os.environ['RANK_ID'], 'version', table['version'], 'master', "
        "os.environ.get('MASTER_ADDR'))\n"
    )
    env = marked_env({"MA_RUN_METHOD": "ranktable", "RANK_TABLE_FILE": str(DATA / "hccl_doc_template2_tf_pods.json"),
                      "MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "0", "MA_CURRENT_INSTANCE_NAME": "tf-bae41"})
    for name in ("VC_WORKER_HOSTS", "MA_VJ_NAME", "MA_TASK_NAME"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "malaunch.entrypoint", "train.py"], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "rank 0 version 1.0 master None" in done.stdout
