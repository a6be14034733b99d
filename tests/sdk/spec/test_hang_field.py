"""``launcher.hang_timeout`` (issue 26): validated with the shim's bounds, written as ``MALAUNCH_HANG_TIMEOUT`` by
all three backends, left unset (off) when the job file does not set it; a job's ``env`` may not set it. Pure."""

from __future__ import annotations

from typing import Any, Dict

import pytest
from malaunch.entrypoint import contract
from malaunch.sdk import SpecError, spec_from_mapping
from malaunch.sdk.backends.local.hostnet import LoopbackNetwork
from malaunch.sdk.backends.local.plan import plan_local
from malaunch.sdk.backends.modelarts.request import build_create_body
from malaunch.sdk.backends.volcano.manifest import contract_env
from malaunch.sdk.spec.contract import launcher_env
from malaunch.sdk.spec.model import LauncherOptions

BASE: Dict[str, Any] = {
    "name": "demo",
    "code_dir": "/c",
    "boot_file": "train.py",
    "image": "reg.example/ml:1",
    "resources": {"hosts": 2, "devices_per_host": 1, "flavor": "modelarts.vm.cpu.8u"},
    "modelarts": {"obs_dir": "obs://bucket/runs/"},
}
NAME = "MALAUNCH_HANG_TIMEOUT"


def _written(spec: Any) -> Dict[str, Dict[str, str]]:
    request, _ = plan_local(spec, job_id="j-1", home="/h", python="/usr/bin/python3", network=LoopbackNetwork("j-1", 2))
    body = build_create_body(spec, "j-1")["algorithm"]["environments"]
    volcano = {item["name"]: item.get("value") for item in contract_env(spec, "j-1")}
    found = {"contract": launcher_env(spec), "modelarts": body, "volcano": volcano}
    found.update({f"local-{i}": host.env for i, host in enumerate(request.hosts)})
    return {where: {k: v for k, v in env.items() if k == NAME} for where, env in found.items()}


def test_the_field_takes_the_shims_bounds() -> None:
    row = contract.VARIABLES[NAME]
    assert row.sdk_field == "launcher.hang_timeout" and row.default == 0.0
    assert row.minimum is not None and row.maximum is not None
    for good in (row.minimum, 2.5, row.maximum):
        assert LauncherOptions(hang_timeout=good).hang_timeout == good
    for bad in (row.minimum - 1, row.maximum + 1, float("nan"), True, "soon"):
        with pytest.raises(SpecError, match=r"launcher\.hang_timeout"):
            LauncherOptions(hang_timeout=bad)


@pytest.mark.parametrize("method", ["torchrun", "ranktable", "msrun"])
def test_every_backend_writes_it(method: str) -> None:
    spec = spec_from_mapping({**BASE, "run_method": method, "launcher": {"hang_timeout": 300}})
    for where, env in _written(spec).items():
        assert env == {NAME: "300"}, where


def test_unset_it_is_off_everywhere() -> None:
    spec = spec_from_mapping({**BASE, "run_method": "torchrun"})
    for where, env in _written(spec).items():
        assert env == {}, where


def test_env_may_not_set_it_and_names_the_field() -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_mapping({**BASE, "env": {NAME: "30"}})
    assert "launcher.hang_timeout" in str(caught.value)
