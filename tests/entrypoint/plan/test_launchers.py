"""Planning is pure: exact argv and per-rank env for every method and topology, with no processes."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

import pytest
import shimutil
from malaunch.entrypoint.contract.cluster_env import parse_cluster_env
from malaunch.entrypoint.launchers.planning import plan_launch
from malaunch.entrypoint.plan.build import merge_flags
from malaunch.entrypoint.plan.inputs import LaunchInputs
from malaunch.entrypoint.plan.rank_table import parse_rank_table

PY = "/opt/py/bin/python"


def inputs(**overrides: Any) -> LaunchInputs:
    base: Dict[str, Any] = dict(
        boot_file="/code/train.py",
        boot_args=("--epochs", "3"),
        interpreter=PY,
        cwd="/work",
        hostname="box",
        path_env="/usr/bin",
    )
    base.update(overrides)
    return LaunchInputs(**base)


def v10_table(servers: int, devices: int) -> Dict[str, Any]:
    return shimutil.v10_table(servers, devices, subnet="10.0.0")


def test_torchrun_single_host_is_standalone() -> None:
    cluster = parse_cluster_env({"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "4"})
    plan = plan_launch(cluster, inputs())
    (proc,) = plan.processes
    assert proc.argv == (
        PY, "-m", "torch.distributed.run",
        "--standalone", "--nnodes=1", "--nproc_per_node=4", "--master_port=18888",
        "--redirects=3", "--log_dir=/work/malaunch-logs/node-0/torchrun", "--monitor_interval=1",
        "/code/train.py", "--epochs", "3",
    )  # fmt: skip
    assert plan.log_source == "attempt_files"
    assert sorted(plan.rank_logs) == [0, 1, 2, 3]


def test_torchrun_looks_at_its_workers_every_second_unless_the_user_says() -> None:
    # the shim pauses torchrun at a worker's first death; torchrun's own 0.1 s tick must not stop the others first
    plan = plan_launch(parse_cluster_env({"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2"}), inputs())
    assert [arg for arg in plan.processes[0].argv if "monitor" in arg] == ["--monitor_interval=1"]
    env = {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2", "MA_EXTRA_TORCHRUN_PARAMS": "--monitor-interval 0.2"}
    argv = plan_launch(parse_cluster_env(env), inputs()).processes[0].argv
    assert [arg for arg in argv if "monitor" in arg] == ["--monitor-interval"]
    assert argv[argv.index("--monitor-interval") + 1] == "0.2"


def test_torchrun_multi_host_static_rendezvous() -> None:
    env = {
        "MA_RUN_METHOD": "torchrun", "MA_NUM_HOSTS": "2", "MA_NUM_GPUS": "4", "VC_TASK_INDEX": "1",
        "VC_WORKER_HOSTS": "a,b", "MA_VJ_NAME": "job-7",
    }  # fmt: skip
    plan = plan_launch(parse_cluster_env(env), inputs(boot_args=()))
    argv = plan.processes[0].argv
    assert argv[3:11] == (
        "--nnodes=2", "--nproc_per_node=4", "--node_rank=1", "--master_addr=a", "--master_port=18888",
        "--rdzv_id=job-7", "--rdzv_backend=static", "--redirects=3",
    )  # fmt: skip
    assert argv[-1] == "/code/train.py"
    assert sorted(plan.rank_logs) == [4, 5, 6, 7]
    assert plan.host == "b"


@pytest.mark.parametrize(
    "extra", ["--master-port=1234", "--master_port 1234", "--master-port 1234", "--master_port=1234"]
)
def test_extra_torchrun_params_replace_presets_whatever_the_spelling(extra: str) -> None:
    env = {"MA_RUN_METHOD": "torchrun", "MA_EXTRA_TORCHRUN_PARAMS": extra}
    argv = plan_launch(parse_cluster_env(env), inputs()).processes[0].argv
    assert "--master_port=18888" not in argv
    assert "1234" in " ".join(argv)
    assert argv.index("/code/train.py") > max(i for i, a in enumerate(argv) if "1234" in a)


def test_merge_flags_keeps_unrelated_presets() -> None:
    assert merge_flags(["--a=1", "--b-c=2", "--d"], ["--b_c", "3", "--d=x"]) == [
        "--a=1",
        "--b_c",
        "3",
        "--d=x",
    ]


def test_msrun_plan() -> None:
    env = {
        "MA_RUN_METHOD": "msrun", "MA_NUM_HOSTS": "2", "MA_NUM_GPUS": "8", "VC_TASK_INDEX": "1",
        "VC_WORKER_HOSTS": "w0,w1", "MSRUN_CLUSTER_TIME_OUT": "120",
    }  # fmt: skip
    plan = plan_launch(parse_cluster_env(env), inputs(master_ip="10.1.1.1", python_dir="/opt/py/bin"))
    (proc,) = plan.processes
    assert proc.argv[3:13] == (
        "--worker_num=16", "--local_worker_num=8", "--master_addr=10.1.1.1", "--master_port=8118",
        "--node_rank=1", "--log_dir=/work/malaunch-logs/node-1/msrun", "--join=True", "--cluster_time_out=120",
        "--tail_worker_log=-2", "/code/train.py",
    )  # fmt: skip
    births = "/work/malaunch-logs/node-1/.births"  # first: its python records each process's rank at its birth
    assert (proc.env["PATH"], plan.births) == (f"{births}:/opt/py/bin:/usr/bin", births)
    assert list(plan.files) == [f"{births}/python"] and plan.files[f"{births}/python"].startswith(f"#!{PY} -IS\n")
    assert plan.rank_logs[8] == "/work/malaunch-logs/node-1/msrun/worker_8.log"
    assert sorted(plan.rank_logs) == list(range(8, 16))


def test_msrun_rank_table_mode_passes_the_file() -> None:
    env = {"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": "2", "MS_RANKTABLE_ENABLE": "True"}
    plan = plan_launch(
        parse_cluster_env(env),
        inputs(master_ip="127.0.0.1", python_dir="/opt/py/bin", rank_table_path="/rt/hccl.json"),
    )
    assert "--rank_table_file=/rt/hccl.json" in plan.processes[0].argv


def test_ranktable_fan_out_one_process_per_device_of_this_server() -> None:
    table = parse_rank_table(v10_table(2, 4), "/rt/hccl.json")
    env = {"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "1", "VC_WORKER_HOSTS": "a,b", "RANK_TABLE_FILE": "/rt"}
    plan = plan_launch(
        parse_cluster_env(env), inputs(rank_table=table, rank_table_path="/rt/hccl.json", server_index=1)
    )
    assert plan.method == "ranktable"
    assert [p.rank for p in plan.processes] == [4, 5, 6, 7]
    for local, proc in enumerate(plan.processes):
        assert proc.argv == (PY, "-u", "/code/train.py", "--epochs", "3")
        assert proc.env["RANK_TABLE_FILE"] == "/rt/hccl.json"
        assert proc.env["RANK_ID"] == proc.env["RANK"] == str(4 + local)
        assert proc.env["RANK_SIZE"] == proc.env["WORLD_SIZE"] == "8"
        assert proc.env["DEVICE_ID"] == proc.env["ASCEND_DEVICE_ID"] == proc.env["LOCAL_RANK"] == str(local)
        assert proc.env["LOCAL_WORLD_SIZE"] == "4"
        assert proc.env["MASTER_ADDR"] == "a"
        assert proc.cwd is None


def test_per_device_working_directories() -> None:
    table = parse_rank_table(v10_table(1, 2), "/rt/hccl.json")
    env = {"RANK_TABLE_FILE": "/rt/hccl.json", "MALAUNCH_DEVICE_WORKDIR": "/ws"}
    plan = plan_launch(
        parse_cluster_env(env), inputs(rank_table=table, rank_table_path="/rt/hccl.json", server_index=0)
    )
    assert [p.cwd for p in plan.processes] == ["/ws/device0", "/ws/device1"]


def test_default_without_rank_table_runs_the_boot_file_once() -> None:
    plan = plan_launch(parse_cluster_env({}), inputs(boot_file="/code/run.sh", boot_args=("x",)))
    assert plan.method == "single"
    assert [p.argv for p in plan.processes] == [("bash", "/code/run.sh", "x")]


def test_log_dir_and_report_defaults_follow_the_platform_log_dir() -> None:
    plan = plan_launch(parse_cluster_env({"MA_LOG_DIR": "/ma/log", "VC_TASK_INDEX": "0"}), inputs())
    assert plan.log_dir == "/ma/log/malaunch/node-0"
    assert plan.report_file == "/ma/log/malaunch/node-0/report.json"
    plan = plan_launch(
        parse_cluster_env({"MALAUNCH_LOG_DIR": "logs", "MALAUNCH_REPORT_FILE": "r.json"}), inputs()
    )
    assert (plan.log_dir, plan.report_file) == ("/work/logs", "/work/r.json")


def test_planning_is_deterministic_and_json_serialisable() -> None:
    env = {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2"}
    first = plan_launch(parse_cluster_env(env), inputs())
    second = plan_launch(parse_cluster_env(env), inputs())
    assert first == second
    data = json.loads(first.render())
    assert data["method"] == "torchrun"
    assert data["processes"][0]["argv"][0] == PY
    assert data["processes"][0]["env"] == {
        "TORCHELASTIC_ERROR_FILE": "/work/malaunch-logs/node-0/torchrun-error.json",
    }
    assert data["processes"][0]["env_defaults"] == {"PYTHONUNBUFFERED": "1", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "30"}


def test_plan_objects_are_frozen() -> None:
    plan = plan_launch(parse_cluster_env({}), inputs())
    with pytest.raises(AttributeError):
        plan.method = "msrun"  # type: ignore[misc]
    proc: Optional[Any] = plan.processes[0]
    with pytest.raises(AttributeError):
        proc.argv = ()  # type: ignore[union-attr]


def test_v0_table_is_converted_to_v10_for_the_ranks() -> None:
    import pathlib

    from malaunch.entrypoint.plan.rank_table.v1 import to_v1_text

    source = pathlib.Path(__file__).parents[1] / "data" / "ranktables" / "v0_jobstart_hccl.json"
    table = parse_rank_table(json.loads(source.read_text()), str(source))
    assert table.format == "v0"
    env = {"RANK_TABLE_FILE": str(source), "MA_CURRENT_INSTANCE_NAME": table.servers[0].pod_name or ""}
    plan = plan_launch(parse_cluster_env(env), inputs(rank_table=table, rank_table_path=str(source), server_index=0))
    converted = "/work/malaunch-logs/node-0/rank_table/jobstart_hccl.json"
    assert set(plan.files) == {converted}
    assert all(proc.env["RANK_TABLE_FILE"] == converted for proc in plan.processes)
    again = parse_rank_table(json.loads(plan.files[converted]), converted)
    assert again.format == "1.0"
    assert again.rank_size == table.rank_size
    ranks = sorted((d.rank_id, d.device_id) for s in table.servers for d in s.devices)
    assert sorted((d.rank_id, d.device_id) for s in again.servers for d in s.devices) == ranks
    assert to_v1_text(table) == plan.files[converted]


def test_v10_table_is_handed_over_as_is() -> None:
    table = parse_rank_table(v10_table(1, 2), "/rt/hccl.json")
    plan = plan_launch(
        parse_cluster_env({"RANK_TABLE_FILE": "/rt/hccl.json"}),
        inputs(rank_table=table, rank_table_path="/rt/hccl.json", server_index=0),
    )
    assert plan.files == {}
    assert plan.processes[0].env["RANK_TABLE_FILE"] == "/rt/hccl.json"


@pytest.mark.parametrize(
    ("extra", "watch"),
    [("", True), ("--max-restarts 0", True), ("--max_restarts=3", False), ("--max-restarts 2 --x", False)],
)
def test_torchrun_workers_are_watched_unless_torchrun_restarts_them(extra: str, watch: bool) -> None:
    env = {"MA_RUN_METHOD": "torchrun", "MA_EXTRA_TORCHRUN_PARAMS": extra}
    plan = plan_launch(parse_cluster_env(env), inputs())
    assert plan.watch_workers is watch
    assert plan.to_json()["watch_workers"] is watch
