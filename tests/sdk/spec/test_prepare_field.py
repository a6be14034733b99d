"""``launcher.prepare`` and ``launcher.prepare_timeout`` (issue 39 item 4): a list of argv lists (a shell string is
refused in one line saying to give a list) and the shim's bounds, written as ``MALAUNCH_PREPARE`` (JSON, read back
by the shim's own parser) and ``MALAUNCH_PREPARE_TIMEOUT`` by all three backends, unset when the job file sets
neither; a job's ``env`` may not set them. Pure."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from fieldenv import BASE, written
from malaunch.entrypoint import contract
from malaunch.entrypoint.contract.prepare_steps import parse_prepare
from malaunch.sdk import SpecError, spec_from_mapping
from malaunch.sdk.spec.model import LauncherOptions

NAMES = ("MALAUNCH_PREPARE", "MALAUNCH_PREPARE_TIMEOUT")
STEPS = [["python", "fetch.py", "--to", "/cache dir"], ["tar", "xf", "/cache dir/d.tar", "-C", "/data"]]




def test_the_fields_take_the_shims_bounds_and_argv_lists_only() -> None:
    row = contract.VARIABLES["MALAUNCH_PREPARE_TIMEOUT"]
    assert row.sdk_field == "launcher.prepare_timeout" and contract.VARIABLES["MALAUNCH_PREPARE"].sdk_field == (
        "launcher.prepare")
    assert row.minimum is not None and row.maximum is not None
    assert LauncherOptions(prepare_timeout=row.maximum).prepare_timeout == row.maximum
    for bad in (row.minimum - 1, row.maximum + 1, float("nan"), True, "soon"):
        with pytest.raises(SpecError, match=r"launcher\.prepare_timeout"):
            LauncherOptions(prepare_timeout=bad)
    assert LauncherOptions(prepare=(("echo", "hi"),)).prepare == (("echo", "hi"),)


@pytest.mark.parametrize(
    ("value", "field", "said"),
    [
        ("curl -o d.tar https://x/d.tar", "launcher.prepare", "not a shell string"),
        (["python fetch.py"], "launcher.prepare[0]", "is a shell string, not a list of words"),
        ([["ok"], []], "launcher.prepare[1]", "must be a non-empty list of words"),
        ([["python", 3]], "launcher.prepare[0]", "must be a non-empty list of words"),
        ([[""]], "launcher.prepare[0]", "must name a program first"),
    ],
)
def test_anything_but_a_list_of_argv_lists_is_refused_naming_the_field(value: Any, field: str, said: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_mapping({**BASE, "launcher": {"prepare": value}})
    assert caught.value.field == field and said in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("method", ["torchrun", "ranktable", "msrun"])
def test_every_backend_writes_them_and_the_shim_reads_back_the_same_steps(method: str) -> None:
    spec = spec_from_mapping({**BASE, "run_method": method, "launcher": {"prepare": STEPS, "prepare_timeout": 900}})
    for where, env in written(spec, NAMES).items():
        assert set(env) == set(NAMES) and env["MALAUNCH_PREPARE_TIMEOUT"] == "900", where
        steps = parse_prepare(env)
        assert steps is not None and steps.steps == tuple(tuple(step) for step in STEPS) and steps.timeout == 900


def test_unset_nothing_is_written_and_the_spec_data_is_as_before() -> None:
    spec = spec_from_mapping({**BASE, "run_method": "torchrun"})
    for where, env in written(spec, NAMES).items():
        assert env == {}, where
    data = spec.launcher.to_dict()
    assert "prepare" not in data and "prepare_timeout" not in data


def test_the_job_file_round_trips() -> None:
    spec = spec_from_mapping(yaml.safe_load(
        "name: demo\ncode_dir: /c\nboot_file: t.py\nlauncher:\n  prepare:\n    - [python, fetch.py]\n"
        "    - [tar, xf, d.tar]\n  prepare_timeout: 60\n"))  # fmt: skip
    assert spec.launcher.prepare == (("python", "fetch.py"), ("tar", "xf", "d.tar"))
    assert spec.launcher.to_dict()["prepare"] == [["python", "fetch.py"], ["tar", "xf", "d.tar"]]
    assert spec_from_mapping({**BASE, "launcher": spec.launcher.to_dict()}).launcher == spec.launcher


@pytest.mark.parametrize("name", NAMES)
def test_env_may_not_set_them_and_names_the_field(name: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_mapping({**BASE, "env": {name: "[]"}})
    assert "launcher.prepare" in str(caught.value)


def test_the_job_file_schema_takes_argv_lists_and_refuses_a_shell_string() -> None:
    import json
    from pathlib import Path

    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[3] / "templates" / "job.schema.json").read_text())
    job = {"name": "demo", "code_dir": ".", "boot_file": "t.py"}
    jsonschema.validate({**job, "launcher": {"prepare": STEPS, "prepare_timeout": 60}}, schema)
    for bad in ({"prepare": "curl -o d.tar x"}, {"prepare": ["python fetch.py"]}, {"prepare": [[]]},
                {"prepare_timeout": 0}):  # fmt: skip
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**job, "launcher": bad}, schema)
