"""The local backend's plan: pure, and each emulated host gets the environment contract the shim reads."""

from __future__ import annotations

import copy
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Dict

import pytest
from malaunch.entrypoint.contract.cluster_env import parse_cluster_env
from malaunch.entrypoint.plan.rank_table import parse_rank_table, select_server
from malaunch.sdk import ConfigError, Job, JobSpec, SubmitPlan
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.backends.local.hostnet import NetnsNetwork
from malaunch.sdk.backends.local.plan import LocalRequest, build_rank_table, host_environment
from malaunch.sdk.plan import AUTO
from malaunch.sdk.spec.loader import spec_from_mapping

NOW = 1_800_000_000.0
JOB_ID = "demo-20270115-080000-abc123"


def spec_of(**fields: Any) -> JobSpec:
    data: Dict[str, Any] = {"name": "demo", "code_dir": "/src/proj", "boot_file": "train.py"}
    data.update(fields)
    return spec_from_mapping(data)


def plan_of(spec: JobSpec, **backend: Any) -> SubmitPlan:
    return LocalBackend(home="/home/u/.malaunch", python="/venv/bin/python", **backend).plan(
        spec, job_id=JOB_ID, now=NOW
    )


def request_of(plan: SubmitPlan) -> LocalRequest:
    assert isinstance(plan.request, LocalRequest)
    return plan.request


def test_plan_is_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = spec_of(run_method="torchrun", resources={"hosts": 2, "devices_per_host": 2}, env={"A": "1"})
    before = copy.deepcopy(spec.to_dict())

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("plan() must not do I/O, read the clock or pick ports")

    monkeypatch.setattr(socket, "socket", forbidden)
    monkeypatch.setattr(time, "time", forbidden)
    monkeypatch.setattr(os, "makedirs", forbidden)
    monkeypatch.setattr(os, "listdir", forbidden)
    first, second = plan_of(spec), plan_of(spec)
    assert first == second
    assert first.to_json() == second.to_json()
    assert spec.to_dict() == before


def test_each_host_env_parses_as_the_platform_contract() -> None:
    spec = spec_of(run_method="torchrun", resources={"hosts": 3, "devices_per_host": 2}, env={"EXTRA": "x"})
    request = request_of(plan_of(spec))
    request = request.with_ports({"MA_TORCHRUN_MASTER_PORT": 23456})
    job_dir = "/home/u/.malaunch/jobs/" + JOB_ID
    for index, host in enumerate(request.hosts):
        cluster = parse_cluster_env(host.env)
        assert cluster.method == "torchrun"
        assert (cluster.num_hosts, cluster.devices_per_host, cluster.node_rank) == (3, 2, index)
        assert cluster.worker_hosts == ("127.0.0.1", "127.0.0.2", "127.0.0.3")
        assert cluster.master_addr == "127.0.0.1"
        assert cluster.torchrun_master_port == 23456
        assert cluster.current_host_ip == f"127.0.0.{index + 1}"
        assert cluster.current_instance_name == f"{JOB_ID}-worker-{index}"
        assert cluster.log_dir == f"{job_dir}/hosts/{index}/logs"
        assert cluster.report_file == f"{job_dir}/hosts/{index}/report.json"
        assert host.env["MA_TASK_NAME"] == "worker" and host.env["MA_VJ_NAME"] == JOB_ID
        assert host.env["VC_WORKER_NUM"] == "3" and host.env["MA_JOB_DIR"] == f"{job_dir}/code"
        assert host.env["MALAUNCH_JOB_ID"] == JOB_ID and host.env["EXTRA"] == "x"
        assert host.argv == ("/venv/bin/python", "-m", "malaunch.entrypoint", f"{job_dir}/code/proj/train.py")
        assert host.cwd == f"{job_dir}/code/proj"
        assert host.console_log == f"{job_dir}/hosts/{index}/console.log"


def test_ranktable_plan_writes_a_v1_table_every_host_finds_itself_in() -> None:
    spec = spec_of(resources={"hosts": 2, "devices_per_host": 4}, launcher={"master_port": 29999})
    request = request_of(plan_of(spec))
    assert request.auto_ports == ("MALAUNCH_COORDINATOR_PORT",)  # the hosts' coordinator: a free port per job
    ((path, text),) = request.files.items()
    table = parse_rank_table(json.loads(text), path)
    assert table.format == "1.0" and table.rank_size == 8
    data = json.loads(text)
    assert data["status"] == "completed"
    assert [s["server_id"] for s in data["server_list"]] == ["127.0.0.1", "127.0.0.2"]
    assert [d["rank_id"] for s in data["server_list"] for d in s["device"]] == [str(i) for i in range(8)]
    assert [d["device_id"] for d in data["server_list"][1]["device"]] == ["0", "1", "2", "3"]
    for index, host in enumerate(request.hosts):
        cluster = parse_cluster_env(host.env)
        assert cluster.rank_table_file == path
        assert cluster.ranktable_master_port == 29999
        server = select_server(
            table,
            host_ip=cluster.current_host_ip,
            instance_name=cluster.current_instance_name,
            node_rank=cluster.node_rank,
            num_hosts=cluster.num_hosts,
        )
        assert server == index


def test_msrun_knobs_and_rank_table_mode() -> None:
    spec = spec_of(
        run_method="msrun",
        resources={"hosts": 1, "devices_per_host": 2},
        launcher={
            "msrun_rank_table": True,
            "msrun_extra_params": ["--bind_core=True", "--sim level"],
            "msrun_cluster_time_out": 90,
            "grace_period": 4.5,
        },
    )
    request = request_of(plan_of(spec))
    env = request.hosts[0].env
    assert env["MA_MSRUN_MASTER_PORT"] == AUTO
    assert request.auto_ports == ("MA_MSRUN_MASTER_PORT", "MALAUNCH_COORDINATOR_PORT")
    cluster = parse_cluster_env(request.with_ports({"MA_MSRUN_MASTER_PORT": 8200}).hosts[0].env)
    assert cluster.msrun_master_port == 8200
    assert cluster.msrun_rank_table is True and cluster.rank_table_file is not None
    assert cluster.msrun_extra == ("--bind_core=True", "--sim level")
    assert cluster.msrun_cluster_time_out == 90 and cluster.grace_period == 4.5
    assert request.grace_period == 4.5


def test_torchrun_extra_params_and_auto_port_in_dry_run_text() -> None:
    spec = spec_of(run_method="torchrun", launcher={"torchrun_extra_params": "--rdzv_conf=timeout=7200"})
    plan = plan_of(spec)
    text = plan.render()
    assert "MA_TORCHRUN_MASTER_PORT=<auto>" in text
    assert "MA_EXTRA_TORCHRUN_PARAMS=--rdzv_conf=timeout=7200" in text
    assert "dry run: nothing was started" in text
    assert json.loads(plan.render_json())["request"]["auto_ports"] == [
        "MA_TORCHRUN_MASTER_PORT", "MALAUNCH_COORDINATOR_PORT"
    ]  # fmt: skip


def test_inputs_and_outputs_become_arguments() -> None:
    spec = spec_of(
        args=["--epochs", "1"],
        inputs=[{"name": "data_url", "path": "/data/set"}],
        outputs=[{"name": "train_url"}, {"name": "ckpt", "path": "/out/ckpt"}],
    )
    request = request_of(plan_of(spec))
    job_dir = "/home/u/.malaunch/jobs/" + JOB_ID
    assert request.hosts[0].argv[-5:] == (
        "--epochs",
        "1",
        "--data_url=/data/set",
        f"--train_url={job_dir}/outputs/train_url",
        "--ckpt=/out/ckpt",
    )
    assert f"{job_dir}/outputs/train_url" in request.dirs


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"resources": {"hosts": 65}}, "too many hosts"),
        ({"resources": {"hosts": 2, "devices_per_host": 200}}, "too many processes"),
        ({"resources": {"devices_per_host": 0}}, "needs at least one device"),
        ({"inputs": [{"name": "d", "path": "obs://bucket/data"}]}, "local paths only"),
    ],
)
def test_local_limits_are_config_errors(fields: Dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        plan_of(spec_of(**fields))
    assert fragment in str(info.value)


def test_msrun_across_hosts_uses_network_namespaces() -> None:
    spec = spec_of(run_method="msrun", resources={"hosts": 2, "devices_per_host": 1})
    request = request_of(plan_of(spec))
    net = NetnsNetwork(JOB_ID, 2)
    assert request.network["kind"] == "netns"
    assert request.network["namespaces"] == [
        f"malaunch-{net.short}-br",
        f"malaunch-{net.short}-0",
        f"malaunch-{net.short}-1",
    ]
    addresses = [h.address for h in request.hosts]
    assert addresses == [f"10.233.{net.subnet}.1", f"10.233.{net.subnet}.2"]
    assert request.hosts[1].argv[:4] == ("ip", "netns", "exec", f"malaunch-{net.short}-1")
    assert request.hosts[1].env["VC_WORKER_HOSTS"] == ",".join(addresses)
    single = request_of(plan_of(spec_of(run_method="msrun")))
    assert single.network["kind"] == "loopback"
    forced = request_of(plan_of(spec_of(run_method="torchrun", resources={"hosts": 2}), network="netns"))
    assert forced.network["kind"] == "netns"


def test_request_json_round_trip() -> None:
    request = request_of(plan_of(spec_of(resources={"hosts": 2, "devices_per_host": 2})))
    assert LocalRequest.from_json(json.loads(json.dumps(request.to_json()))) == request


def test_build_rank_table_numbering() -> None:
    table = build_rank_table(("a", "b", "c"), 2)
    assert table["server_count"] == "3"
    assert [[d["rank_id"] for d in s["device"]] for s in table["server_list"]] == [["0", "1"], ["2", "3"], ["4", "5"]]


def test_host_environment_strips_contract_and_puts_python_first() -> None:
    inherited = {"PATH": "/usr/bin", "HOME": "/root", "MA_NUM_HOSTS": "9", "RANK": "3", "VC_TASK_INDEX": "5"}
    env = host_environment(inherited, {"MA_NUM_HOSTS": "2", "X": "1"}, "/venv/bin/python")
    assert env["PATH"] == "/venv/bin:/usr/bin"
    assert env["MA_NUM_HOSTS"] == "2" and env["X"] == "1" and env["HOME"] == "/root"
    assert "RANK" not in env and "VC_TASK_INDEX" not in env
    assert inherited["MA_NUM_HOSTS"] == "9"


def test_dry_run_through_job_creates_nothing(tmp_path: Path) -> None:
    backend = LocalBackend(home=str(tmp_path / "home"))
    job = Job(name="demo", code_dir=str(tmp_path), boot_file="t.py")
    plan = job.plan(job_id=JOB_ID, now=NOW, backend=backend)
    assert plan.job_id == JOB_ID and plan.created_at == NOW
    assert not (tmp_path / "home").exists()


def test_home_comes_from_environment() -> None:
    assert LocalBackend(environ={"MALAUNCH_HOME": "/x/y"}).home == "/x/y"
    assert LocalBackend(environ={"HOME": "/h"}).home.endswith(".malaunch")
    with pytest.raises(ConfigError):
        LocalBackend(network="bridge")
