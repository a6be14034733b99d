"""The hosts' coordinator fields (issue 25): ``launcher.coordinator_port``, ``heartbeat_timeout``, ``host_wait``
are validated with the shim's bounds and become the contract's variables on every backend; a job's ``env`` may
not set them (nor the job's secret, which the backend makes). Pure; no servers."""

from __future__ import annotations

import pytest
from fieldenv import BASE
from malaunch.entrypoint import contract
from malaunch.sdk import SpecError, spec_from_mapping
from malaunch.sdk.backends.local.hostnet import LoopbackNetwork
from malaunch.sdk.backends.local.plan import plan_local
from malaunch.sdk.backends.modelarts.request import build_create_body
from malaunch.sdk.backends.volcano.manifest import contract_env
from malaunch.sdk.plan import AUTO
from malaunch.sdk.spec.contract import launcher_env
from malaunch.sdk.spec.model import LauncherOptions

NAMES = ("MALAUNCH_COORDINATOR_PORT", "MALAUNCH_HEARTBEAT_TIMEOUT", "MALAUNCH_HOST_WAIT")


def _bounds(name: str) -> tuple[float, float]:
    row = contract.VARIABLES[name]
    assert row.minimum is not None and row.maximum is not None
    return row.minimum, row.maximum


@pytest.mark.parametrize(
    ("field", "name"),
    [("coordinator_port", NAMES[0]), ("heartbeat_timeout", NAMES[1]), ("host_wait", NAMES[2])],
)
def test_the_fields_take_the_shims_bounds(field: str, name: str) -> None:
    low, high = _bounds(name)
    for good in (low, high):
        value = int(good) if field == "coordinator_port" else good
        assert getattr(LauncherOptions(**{field: value}), field) == value
    for bad in (low - 1, high + 1):
        value = int(bad) if field == "coordinator_port" else bad
        with pytest.raises(SpecError, match=rf"launcher\.{field}"):
            LauncherOptions(**{field: value})
    with pytest.raises(SpecError, match=rf"launcher\.{field}"):
        spec_from_mapping({**BASE, "launcher": {field: "soon"}})


def test_seconds_must_be_finite_numbers() -> None:
    for bad in (float("nan"), float("inf"), True):
        with pytest.raises(SpecError, match=r"launcher\.heartbeat_timeout"):
            LauncherOptions(heartbeat_timeout=bad)


@pytest.mark.parametrize("method", ["torchrun", "ranktable", "msrun"])
def test_every_backend_writes_the_fields(method: str) -> None:
    launcher = {"coordinator_port": 29999, "heartbeat_timeout": 7.5, "host_wait": 0}
    spec = spec_from_mapping({**BASE, "run_method": method, "launcher": launcher})
    expected = {NAMES[0]: "29999", NAMES[1]: "7.5", NAMES[2]: "0"}
    assert {k: v for k, v in launcher_env(spec).items() if k in NAMES} == expected
    request, _ = plan_local(spec, job_id="j-1", home="/h", python="/usr/bin/python3", network=LoopbackNetwork("j-1", 2))
    for host in request.hosts:
        assert {k: v for k, v in host.env.items() if k in NAMES} == expected
    environments = build_create_body(spec, "j-1")["algorithm"]["environments"]
    assert {k: v for k, v in environments.items() if k in NAMES} == expected
    volcano = {item["name"]: item.get("value") for item in contract_env(spec, "j-1")}
    assert {k: v for k, v in volcano.items() if k in NAMES} == expected


def test_unset_the_local_backend_picks_a_free_port_the_cloud_keeps_the_default() -> None:
    spec = spec_from_mapping({**BASE, "run_method": "torchrun"})
    request, _ = plan_local(spec, job_id="j-1", home="/h", python="/usr/bin/python3", network=LoopbackNetwork("j-1", 2))
    assert NAMES[0] in request.auto_ports
    assert all(host.env[NAMES[0]] == AUTO for host in request.hosts)
    filled = request.with_ports({name: 40000 + i for i, name in enumerate(request.auto_ports)})
    ports = {host.env[NAMES[0]] for host in filled.hosts}
    assert len(ports) == 1 and ports != {AUTO}  # one port for the job, the same on every host
    assert not set(NAMES) & set(build_create_body(spec, "j-1")["algorithm"]["environments"])
    assert not set(NAMES) & {item["name"] for item in contract_env(spec, "j-1")}  # the shim's 29510, 20 s, 120 s


@pytest.mark.parametrize(("name", "field"), [(NAMES[0], "coordinator_port"), (NAMES[1], "heartbeat_timeout"),
                                             (NAMES[2], "host_wait")])  # fmt: skip
def test_env_may_not_set_them_and_names_the_field(name: str, field: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_mapping({**BASE, "env": {name: "30"}})
    assert f"launcher.{field}" in str(caught.value)


def test_env_may_not_set_the_job_secret_and_its_value_is_not_shown() -> None:
    value = "hunter2-very-private-value"
    with pytest.raises(SpecError) as caught:
        spec_from_mapping({**BASE, "env": {"MALAUNCH_JOB_SECRET": value}})
    assert "env.MALAUNCH_JOB_SECRET" in str(caught.value)
    assert value not in str(caught.value)
