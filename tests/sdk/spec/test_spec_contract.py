"""The SDK agrees with the shim's environment-contract table (malaunch.entrypoint.contract).

``launcher.msrun_cluster_time_out`` takes its bounds from the table: -1 (msrun waits forever) is valid for the
shim and the docs, and the spec refused it before (issue 18's third drift).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from malaunch.entrypoint import contract
from malaunch.sdk import spec_from_mapping
from malaunch.sdk.errors import SpecError
from malaunch.sdk.spec.contract import LAUNCHER_VARIABLES, launcher_env
from malaunch.sdk.spec.model import RESERVED_ENV, LauncherOptions

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("value", [-1, 0, 1, 600])
def test_msrun_cluster_time_out_accepts_what_the_shim_accepts(value: int) -> None:
    assert LauncherOptions(msrun_cluster_time_out=value).msrun_cluster_time_out == value


def test_minus_one_reaches_the_container_as_the_shim_reads_it() -> None:
    spec = spec_from_mapping({"name": "demo", "code_dir": "/c", "boot_file": "train.py", "run_method": "msrun",
                              "launcher": {"msrun_cluster_time_out": -1}})  # fmt: skip
    env = launcher_env(spec)
    assert env["MSRUN_CLUSTER_TIME_OUT"] == "-1"
    assert contract.parse_int(env, "MSRUN_CLUSTER_TIME_OUT") == -1


@pytest.mark.parametrize("text", ["-1", "0", "600"])
def test_the_variable_in_env_moves_into_the_field_with_the_shims_bound(text: str) -> None:
    spec = spec_from_mapping({"name": "demo", "code_dir": "/c", "boot_file": "train.py", "run_method": "msrun",
                              "env": {"MSRUN_CLUSTER_TIME_OUT": text}})  # fmt: skip
    assert spec.launcher.msrun_cluster_time_out == int(text)


def test_the_variable_in_env_below_the_shims_bound_is_refused() -> None:
    with pytest.raises(SpecError, match=r"env\.MSRUN_CLUSTER_TIME_OUT.*>= -1"):
        spec_from_mapping({"name": "demo", "code_dir": "/c", "boot_file": "train.py", "run_method": "msrun",
                           "env": {"MSRUN_CLUSTER_TIME_OUT": "-2"}})  # fmt: skip


def test_msrun_cluster_time_out_below_the_shims_bound_is_refused() -> None:
    with pytest.raises(SpecError, match=r"launcher\.msrun_cluster_time_out.*>= -1"):
        LauncherOptions(msrun_cluster_time_out=-2)


def test_reserved_env_is_the_tables_sdk_fields() -> None:
    for name, field in RESERVED_ENV.items():
        row = contract.VARIABLES[contract.ALIASES.get(name, name)]
        assert row.sdk_field == field, name
    from_sdk = {alias for row in contract.VARIABLES.values() if row.sdk_field is not None
                for alias in (row.name, *row.aliases)}  # fmt: skip
    assert from_sdk == set(RESERVED_ENV)


def test_launcher_variables_are_the_tables_launcher_fields() -> None:
    for name, row in LAUNCHER_VARIABLES.items():
        assert contract.VARIABLES[name].sdk_field == f"launcher.{row.field}", name


@pytest.mark.parametrize("module", ["sdk/backends/local/plan.py", "sdk/backends/volcano/manifest.py"])
def test_topology_variables_the_backends_write_are_in_the_table(module: str) -> None:
    source = (ROOT / module).read_text()
    names = set(re.findall(r"\bName\.([A-Z][A-Z0-9_]+)", source))
    assert re.search(r"from malaunch\.entrypoint\.public import [^\n]*\bName\b", source)
    assert "MA_NUM_HOSTS" in names
    assert names - set(contract.VARIABLES) == set()
    assert all(getattr(contract.Name, name) == name for name in names)
    keys = set(re.findall(r'"((?:MA|VC|MS|MSRUN|MALAUNCH)_[A-Z0-9_]+)"\s*:', source))
    assert keys == set(), f"{module} spells variable names the contract exports"
    quoted = set(re.findall(r'"((?:MA|VC|MS|MSRUN|MALAUNCH)_[A-Z0-9_]+)"', source))
    assert quoted - set(contract.VARIABLES) == set()


def test_the_job_schema_has_the_shims_bound() -> None:
    schema = json.loads((ROOT / "templates" / "job.schema.json").read_text())
    field = schema["properties"]["launcher"]["properties"]["msrun_cluster_time_out"]
    assert field["minimum"] == contract.int_bounds("MSRUN_CLUSTER_TIME_OUT")[0]
