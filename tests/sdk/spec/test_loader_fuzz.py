"""Fuzzing job-file loading: any text, any nested data -> a JobSpec or a SpecError; never anything else.

The CLI half checks that a bad job file exits 2 with one ``ma-submit: error:`` line and no traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from malaunch.sdk import JobSpec, SpecError
from malaunch.sdk.cli import cli
from malaunch.sdk.spec.loader import JOB_FIELDS, load_job_text, spec_from_mapping

pytestmark = pytest.mark.slow  # searches of many examples

KEYS = sorted({key for keys in JOB_FIELDS.values() for key in keys} | {"gpus", "nodes", "", "0"})
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["train.py", "torchrun", "msrun", "ranktable", "local", ".", "../x", "/abs", "obs://b/x"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), inner, max_size=5),
    ),
    max_leaves=25,
)
job_like = st.fixed_dictionaries(
    {},
    optional={key: values for key in JOB_FIELDS[""]},
)


def _check(load: Any, data: Any) -> None:
    try:
        spec = load(data)
    except SpecError as error:
        message = str(error)
        assert message and "\n" not in message
        assert error.field
        return
    assert isinstance(spec, JobSpec)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job_like)
def test_any_mapping_gives_spec_or_spec_error(data: Any) -> None:
    _check(lambda d: spec_from_mapping(d, base_dir="/jobs"), data)


@settings(max_examples=200, deadline=None)
@given(values)
def test_any_value_gives_spec_or_spec_error(data: Any) -> None:
    _check(lambda d: spec_from_mapping(d, base_dir="/jobs"), data)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_gives_spec_or_spec_error(text: str) -> None:
    _check(lambda t: load_job_text(t, base_dir="/jobs", source="job.yaml"), text)


@settings(max_examples=200, deadline=None)
@given(job_like)
def test_any_dumped_yaml_gives_spec_or_spec_error(data: Any) -> None:
    try:
        text = yaml.safe_dump(data)
    except (yaml.YAMLError, ValueError):
        return
    _check(lambda t: load_job_text(t, base_dir="/jobs", source="job.yaml"), text)


YAML_TRICKS = [
    "!!python/object:os.system {}",
    "a: &x [*x]",
    "name: !!binary aGVsbG8=\ncode_dir: .\nboot_file: t.py",
    "? [1, 2]\n: x",
    "name: 2021-13-45\ncode_dir: .\nboot_file: t.py",
    "{a: 1, a: 2}",
    "- - - - - - - - -",
    "name: x\ncode_dir: .\nboot_file: t.py\nenv: !!set {A, B}",
    "\x00",
    "name: x\n\tcode_dir: .",
    "[" * 200,
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.sampled_from(YAML_TRICKS), st.text(max_size=80), job_like.map(lambda d: yaml.safe_dump(d))))
def test_cli_bad_job_file_exits_2_with_one_line(tmp_path: Path, text: str) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["--dry-run", str(job)], env={"MALAUNCH_HOME": str(tmp_path / "home")})
    if result.exit_code == 0:  # a valid job file: the dry run printed a plan and started nothing
        assert not (tmp_path / "home").exists()
        return
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ma-submit: error: "), result.stderr
    assert "Traceback" not in result.output + result.stderr


def test_tricks_are_spec_errors() -> None:
    for text in YAML_TRICKS:
        _check(lambda t: load_job_text(t, base_dir="/jobs", source="job.yaml"), text)
