"""The launcher-field tests' common parts (tests/sdk/spec): a job every backend plans, and what each backend writes
of the contract's variables for it. Pure: nothing starts."""

from __future__ import annotations

from typing import Any, Collection, Dict

from malaunch.sdk.backends.local.hostnet import LoopbackNetwork
from malaunch.sdk.backends.local.plan import plan_local
from malaunch.sdk.backends.modelarts.request import build_create_body
from malaunch.sdk.backends.volcano.manifest import contract_env
from malaunch.sdk.spec.contract import launcher_env

__all__ = ["BASE", "written"]

#: A job of 2 hosts of 1 device that every backend plans (add ``run_method``, ``launcher``, ``env``).
BASE: Dict[str, Any] = {
    "name": "demo",
    "code_dir": "/c",
    "boot_file": "train.py",
    "image": "reg.example/ml:1",
    "resources": {"hosts": 2, "devices_per_host": 1, "flavor": "modelarts.vm.cpu.8u"},
    "modelarts": {"obs_dir": "obs://bucket/runs/"},
}


def written(spec: Any, names: Collection[str]) -> Dict[str, Dict[str, str]]:
    """Where each backend writes the contract's variables for ``spec`` (the contract itself, ModelArts' create
    body, Volcano's pod environment, each local host's) -> those of them named in ``names``."""
    request, _ = plan_local(spec, job_id="j-1", home="/h", python="/usr/bin/python3", network=LoopbackNetwork("j-1", 2))
    body = build_create_body(spec, "j-1")["algorithm"]["environments"]
    volcano = {item["name"]: item.get("value") for item in contract_env(spec, "j-1")}
    found = {"contract": launcher_env(spec), "modelarts": body, "volcano": volcano}
    found.update({f"local-{i}": host.env for i, host in enumerate(request.hosts)})
    return {where: {k: v for k, v in env.items() if k in names} for where, env in found.items()}
