"""The one launcher-variable table (``malaunch.sdk.spec.contract``): what each backend writes from the
``launcher:`` section, and the loader's way back from ``env:`` to the same fields. Pure; no servers."""

from __future__ import annotations

from typing import Any, Dict

import pytest
from malaunch.sdk import SpecError, spec_from_mapping
from malaunch.sdk.backends.local.hostnet import LoopbackNetwork
from malaunch.sdk.backends.local.plan import plan_local
from malaunch.sdk.backends.modelarts.request import build_create_body
from malaunch.sdk.backends.volcano.manifest import contract_env
from malaunch.sdk.plan import AUTO
from malaunch.sdk.spec.contract import LAUNCHER_VARIABLES, launcher_env
from malaunch.sdk.spec.loader import LAUNCHER_ENV
from malaunch.sdk.spec.model import RESERVED_ENV, JobSpec

BASE: Dict[str, Any] = {
    "name": "demo",
    "code_dir": "/c",
    "boot_file": "train.py",
    "image": "reg.example/ml:1",
    "resources": {"hosts": 2, "devices_per_host": 2, "flavor": "modelarts.vm.cpu.8u"},
    "modelarts": {"obs_dir": "obs://bucket/runs/"},
}
FULL_LAUNCHER: Dict[str, Any] = {
    "master_port": 29600,
    "torchrun_extra_params": "--rdzv_conf timeout=7200",
    "msrun_master_port": 8200,
    "msrun_extra_params": ["--bind_core=True"],
    "msrun_cluster_time_out": 120,
    "msrun_rank_table": True,
    "grace_period": 7.5,
    "max_restarts": 2,
    "restart_on": [1, 137],
}


def make(run_method: str, **launcher: Any) -> JobSpec:
    return spec_from_mapping({**BASE, "run_method": run_method, "launcher": launcher})


def test_full_launcher_section_for_each_method() -> None:
    common = {
        "MA_EXTRA_TORCHRUN_PARAMS": "--rdzv_conf timeout=7200",
        "MA_MSRUN_MASTER_PORT": "8200",
        "MA_EXTRA_MSRUN_PARAMS": "--bind_core=True",
        "MSRUN_CLUSTER_TIME_OUT": "120",
        "MALAUNCH_GRACE_PERIOD": "7.5",
        "MA_MAX_RESTARTS": "2",
        "MALAUNCH_RESTART_ON": "1,137",
    }
    assert launcher_env(make("torchrun", **FULL_LAUNCHER)) == {**common, "MA_TORCHRUN_MASTER_PORT": "29600"}
    assert launcher_env(make("ranktable", **FULL_LAUNCHER)) == {**common, "MALAUNCH_MASTER_PORT": "29600"}
    assert launcher_env(make("msrun", **FULL_LAUNCHER)) == {**common, "MS_RANKTABLE_ENABLE": "True"}


def test_unset_fields_set_nothing_and_open_ports_follow_the_caller() -> None:
    for method in ("torchrun", "ranktable", "msrun"):
        assert launcher_env(make(method)) == {}
    coordinator = {"MALAUNCH_COORDINATOR_PORT": AUTO}  # every method's: the hosts' coordinator
    assert launcher_env(make("torchrun"), open_port=AUTO) == {"MA_TORCHRUN_MASTER_PORT": AUTO, **coordinator}
    assert launcher_env(make("ranktable"), open_port=AUTO) == {"MALAUNCH_MASTER_PORT": AUTO, **coordinator}
    assert launcher_env(make("msrun"), open_port=AUTO) == {"MA_MSRUN_MASTER_PORT": AUTO, **coordinator}
    # restart_on qualifies max_restarts: alone it sends nothing
    assert launcher_env(make("torchrun", restart_on="never")) == {}
    assert launcher_env(make("torchrun", max_restarts=1)) == {
        "MA_MAX_RESTARTS": "1",
        "MALAUNCH_RESTART_ON": "retryable",
    }


@pytest.mark.parametrize("method", ["torchrun", "ranktable", "msrun"])
def test_every_backend_writes_the_same_variables(method: str) -> None:
    spec = make(method, **FULL_LAUNCHER)
    expected = launcher_env(spec)
    request, _notes = plan_local(
        spec, job_id="j-1", home="/h", python="/usr/bin/python3", network=LoopbackNetwork("j-1", 2)
    )
    for host in request.hosts:  # a port the job file leaves open is the local backend's to fill
        assert {k: v for k, v in host.env.items() if k in LAUNCHER_VARIABLES} == launcher_env(spec, open_port=AUTO)
    body = build_create_body(spec, "j-1")
    environments = body["algorithm"]["environments"]
    assert {k: v for k, v in environments.items() if k in LAUNCHER_VARIABLES} == expected
    volcano = {item["name"]: item.get("value") for item in contract_env(spec, "j-1")}
    assert {k: v for k, v in volcano.items() if k in LAUNCHER_VARIABLES} == expected


def test_modelarts_and_volcano_leave_open_ports_unset_local_fills_them() -> None:
    spec = make("torchrun")
    body = build_create_body(spec, "j-1")
    assert "MA_TORCHRUN_MASTER_PORT" not in body["algorithm"]["environments"]
    assert "MA_TORCHRUN_MASTER_PORT" not in {item["name"] for item in contract_env(spec, "j-1")}
    request, _ = plan_local(spec, job_id="j-1", home="/h", python="/usr/bin/python3", network=LoopbackNetwork("j-1", 2))
    assert request.auto_ports == ("MA_TORCHRUN_MASTER_PORT", "MALAUNCH_COORDINATOR_PORT")


@pytest.mark.parametrize("method", ["torchrun", "ranktable", "msrun"])
def test_env_of_a_job_file_round_trips_to_the_same_fields(method: str) -> None:
    """The platform's variables written for a spec, put back in a job file's env:, load as the same fields."""
    spec = make(method, **{k: v for k, v in FULL_LAUNCHER.items() if k not in ("max_restarts", "restart_on")})
    reloaded = spec_from_mapping({**BASE, "run_method": method, "env": launcher_env(spec)})
    assert launcher_env(reloaded) == launcher_env(spec)  # fields that do not apply to the method send nothing
    assert reloaded.env == {}
    if method == "torchrun":
        assert reloaded.launcher.master_port == 29600 and reloaded.launcher.msrun_cluster_time_out == 120


def test_one_table_in_both_directions() -> None:
    from_env = {name: f"launcher.{row.field}" for name, row in LAUNCHER_VARIABLES.items() if row.from_env}
    assert from_env == {name: field for name, field in LAUNCHER_ENV.items() if field != "run_method"}
    # every launcher variable is reserved in a Python spec's env, naming its field
    assert {name: field for name, field in RESERVED_ENV.items() if field.startswith("launcher.")} == {
        name: f"launcher.{row.field}" for name, row in LAUNCHER_VARIABLES.items()
    }


@pytest.mark.parametrize("name", ["MA_MAX_RESTARTS", "MALAUNCH_RESTART_ON"])
def test_malaunch_restart_variables_in_env_point_to_the_launcher_fields(name: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_mapping({**BASE, "env": {name: "2"}})
    assert f"launcher.{LAUNCHER_VARIABLES[name].field}" in str(caught.value)
