"""The toy backend, a folder of the tests plus its one registry line, is a backend like the shipped ones: a job file
with a ``toy:`` section loads, is checked (a bad value is one clear line), is in the schema and dry-runs through
``ma-submit --backend toy``. Without the line, the same job file is refused (the line is what makes it a backend).
Its conformance is tested with the other backends' (``tests/sdk/backends/test_backend_conformance.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Iterator

import jsonschema
import pytest
import yaml
from malaunch.sdk import JobSpec, SpecError, load_job_file
from malaunch.sdk.backends import registry
from malaunch.sdk.spec.schema import job_schema

from toy import LINE
from toy.cli import toy_ma_submit
from toy.options import ToyOptions

SDK = Path(__file__).resolve().parents[4] / "sdk"
JOB = """\
name: toy-demo
backend: toy
code_dir: code
boot_file: train.py
resources: {hosts: 2}
toy:
  steps: 3
"""


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(registry.BACKEND_MODULES, *LINE)  # the one line, for the test's duration
    yield


def _job(tmp_path: Path, text: str = JOB) -> Path:
    (tmp_path / "code").mkdir(exist_ok=True)
    (tmp_path / "code" / "train.py").write_text("print('hello')\n")
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def test_a_job_file_with_a_toy_section_loads(toy: None, tmp_path: Path) -> None:
    spec = load_job_file(str(_job(tmp_path)))
    assert spec.sections["toy"] == ToyOptions(steps=3) == spec.toy
    assert spec.to_dict()["toy"] == {"steps": 3}
    assert load_job_file(str(_job(tmp_path, JOB.replace("toy:\n  steps: 3\n", "")))).toy is None
    assert JobSpec(name="a", code_dir="/c", boot_file="b.py", toy=ToyOptions()).toy == ToyOptions()


@pytest.mark.parametrize(
    ("section", "field", "problem"),
    [("steps: 0", "toy.steps", "must be >= 1"), ("steps: many", "toy.steps", "must be a whole number"),
     ("stepz: 3", "toy.stepz", "did you mean steps?")],
)  # fmt: skip
def test_a_bad_toy_section_is_one_clear_line(toy: None, tmp_path: Path, section: str, field: str, problem: str) -> None:
    with pytest.raises(SpecError) as error:
        load_job_file(str(_job(tmp_path, JOB.replace("steps: 3", section))))
    assert error.value.field == field and problem in str(error.value) and "\n" not in str(error.value)


def test_the_schema_holds_the_toy_section(toy: None, tmp_path: Path) -> None:
    schema = job_schema()
    data = yaml.safe_load(JOB)
    jsonschema.validate(data, schema, cls=jsonschema.Draft202012Validator)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**data, "toy": {"steps": 0}}, schema, cls=jsonschema.Draft202012Validator)


def _env(tmp_path: Path, cli_env: Dict[str, str]) -> Dict[str, str]:
    return {**cli_env, "MALAUNCH_HOME": str(tmp_path / "home")}


def test_ma_submit_dry_runs_a_toy_job(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    job = _job(tmp_path)
    done = toy_ma_submit(["--backend", "toy", "--dry-run", "--output", "json", str(job)], _env(tmp_path, cli_env))
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["backend"] == "toy" and plan["job_id"].startswith("toy-toy-demo-")
    assert plan["request"] == {"folder": str(tmp_path / "home" / "toy-jobs"), "hosts": 2, "steps": 3}
    assert plan["spec"]["toy"] == {"steps": 3} and plan["spec"]["volcano"]["queue"] == "default"
    assert not (tmp_path / "home" / "toy-jobs").exists()  # a dry run records nothing
    text = toy_ma_submit(["--backend", "toy", "--dry-run", str(job)], _env(tmp_path, cli_env))
    assert text.returncode == 0 and "toy: record in" in text.stdout and "2 host(s) x 3 step(s)" in text.stdout


def test_ma_submit_refuses_a_bad_toy_section_in_one_line(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    job = _job(tmp_path, JOB.replace("steps: 3", "steps: 0"))
    done = toy_ma_submit(["--backend", "toy", "--dry-run", str(job)], _env(tmp_path, cli_env))
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "toy.steps" in done.stderr and "Traceback" not in done.stderr


def test_without_its_line_toy_is_no_backend(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    assert "toy" not in registry.BACKEND_NAMES
    with pytest.raises(SpecError) as section:
        load_job_file(str(_job(tmp_path)))
    assert section.value.field == "toy" and "unknown field" in str(section.value)
    with pytest.raises(SpecError) as backend:
        load_job_file(str(_job(tmp_path, JOB.replace("toy:\n  steps: 3\n", ""))))
    assert backend.value.field == "backend" and "must be one of local, modelarts, volcano" in str(backend.value)


def test_nothing_of_the_sdk_names_the_toy() -> None:
    named = [str(path) for path in SDK.rglob("*.py") if "toy" in path.read_text().lower().replace("destroy", "")]
    assert named == [], "a backend of the tests is its folder and its line, nothing in sdk/"
