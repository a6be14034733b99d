"""The ``checkpoint:`` section (issue 39): ``keep`` validated with the shim's bounds; on the local backend every
host gets ``MALAUNCH_CHECKPOINT_DIR`` (the job folder's ``checkpoints/``, the same for every host and every
restart) and ``MALAUNCH_CHECKPOINT_KEEP``; without the section nothing is set; ``env`` may not set them. Pure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import jsonschema
import pytest
import yaml
from malaunch.entrypoint import contract
from malaunch.sdk import Job, SpecError, spec_from_mapping
from malaunch.sdk.backends.local.hostnet import LoopbackNetwork
from malaunch.sdk.backends.local.plan import plan_local
from malaunch.sdk.spec.loader import load_job_text

SCHEMA = json.loads((Path(__file__).resolve().parents[3] / "templates" / "job.schema.json").read_text())

BASE: Dict[str, Any] = {"name": "demo", "code_dir": "/c", "boot_file": "train.py", "run_method": "torchrun",
                        "resources": {"hosts": 2}}  # fmt: skip
NAMES = ("MALAUNCH_CHECKPOINT_DIR", "MALAUNCH_CHECKPOINT_KEEP")


def _local(spec: Any) -> Dict[int, Dict[str, str]]:
    request, _ = plan_local(spec, job_id="j-1", home="/h", python="/usr/bin/python3", network=LoopbackNetwork("j-1", 2))
    return {host.index: {k: v for k, v in host.env.items() if k in NAMES} for host in request.hosts}


def test_keep_takes_the_shims_default_and_bounds() -> None:
    row = contract.VARIABLES["MALAUNCH_CHECKPOINT_KEEP"]
    assert row.sdk_field == "checkpoint.keep" and row.default == 2
    assert spec_from_mapping({**BASE, "checkpoint": {}}).checkpoint.keep == 2  # type: ignore[union-attr]
    for bad in (0, 1001, True, "two", 1.5):
        with pytest.raises(SpecError, match=r"checkpoint\.keep"):
            spec_from_mapping({**BASE, "checkpoint": {"keep": bad}})
    with pytest.raises(SpecError, match=r"checkpoint\.kept"):
        spec_from_mapping({**BASE, "checkpoint": {"kept": 3}})


def test_every_local_host_gets_the_same_folder_under_the_job() -> None:
    spec = spec_from_mapping({**BASE, "checkpoint": {"keep": 3}})
    env = _local(spec)
    assert env[0] == env[1] == {"MALAUNCH_CHECKPOINT_DIR": "/h/jobs/j-1/checkpoints", "MALAUNCH_CHECKPOINT_KEEP": "3"}


def test_without_the_section_nothing_is_set() -> None:
    assert _local(spec_from_mapping(BASE)) == {0: {}, 1: {}}
    assert "checkpoint" not in spec_from_mapping(BASE).to_dict()


def test_the_job_file_the_schema_and_job_agree() -> None:
    text = "name: demo\ncode_dir: /c\nboot_file: train.py\ncheckpoint:\n  keep: 4\n"
    jsonschema.validate(yaml.safe_load(text), SCHEMA, cls=jsonschema.Draft202012Validator)
    spec = load_job_text(text)
    assert spec.checkpoint is not None and spec.checkpoint.keep == 4
    assert Job(name="demo", code_dir="/c", boot_file="train.py", checkpoint={"keep": 4}).spec == spec
    assert spec_from_mapping(spec.to_dict()) == spec
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**yaml.safe_load(text), "checkpoint": {"keep": 0}}, SCHEMA)


def test_env_may_not_set_them() -> None:
    for name in NAMES:
        with pytest.raises(SpecError, match=rf"env\.{name}"):
            spec_from_mapping({**BASE, "env": {name: "/x"}})


def _refused(key: str, bad: object) -> None:
    with pytest.raises(SpecError, match=rf"checkpoint\.{key}"):
        spec_from_mapping({**BASE, "checkpoint": {key: bad}})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "d", "code_dir": "/c", "boot_file": "t.py", "checkpoint": {key: bad}}, SCHEMA,
                            cls=jsonschema.Draft202012Validator)  # fmt: skip


def _kept(section: Dict[str, Any]) -> None:
    jsonschema.validate({"name": "d", "code_dir": "/c", "boot_file": "t.py", "checkpoint": section}, SCHEMA,
                        cls=jsonschema.Draft202012Validator)  # fmt: skip
    spec = spec_from_mapping({**BASE, "checkpoint": section})
    assert spec.checkpoint is not None and {k: v for k, v in spec.checkpoint.to_dict().items() if v} == section
    assert spec_from_mapping(spec.to_dict()) == spec


def test_volume_is_a_claims_name() -> None:
    for bad in ("Not_A_Claim", 3, "", "-x"):
        _refused("volume", bad)
    _kept({"keep": 2, "volume": "ckpt-pvc"})


def test_obs_path_is_an_obs_folder() -> None:
    for bad in ("s3://bucket/x", "/bucket/x", "obs://B/x", 7):
        _refused("obs_path", bad)
    _kept({"keep": 2, "obs_path": "obs://bucket/ckpt/run-1/"})
