"""A backend's own job-file section (its dataclass, its checks, its patterns) lives in the backend's folder; the
spec holds the sections and checks them only through the registry."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from malaunch.sdk import JobSpec
from malaunch.sdk.backends import option_sections
from malaunch.sdk.backends.modelarts.options import ModelArtsOptions
from malaunch.sdk.backends.volcano.options import VolcanoOptions
from malaunch.sdk.errors import SpecError

SDK = Path(__file__).resolve().parents[3] / "sdk"
BASE = {"name": "a", "code_dir": "/tmp", "boot_file": "b.py"}


def test_each_section_is_declared_in_its_backends_folder() -> None:
    for section in option_sections():
        assert section.options.__module__ == f"malaunch.sdk.backends.{section.name}.options", section.name
    assert (VolcanoOptions.__module__, ModelArtsOptions.__module__) == (
        "malaunch.sdk.backends.volcano.options", "malaunch.sdk.backends.modelarts.options",
    )  # fmt: skip


def test_the_spec_defines_no_backend_section() -> None:
    tree = ast.parse((SDK / "spec" / "model.py").read_text())
    classes = sorted(node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef))
    assert classes == ["CheckpointOptions", "DataSpec", "JobSpec", "LauncherOptions", "Resources"]
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert not names & {"_DNS_LABEL", "_DNS_NAME", "_RESOURCE_NAME", "_OBS_DIR"}


def test_a_section_of_the_wrong_type_is_refused_by_the_generic_check() -> None:
    with pytest.raises(SpecError) as volcano:
        JobSpec(**BASE, volcano={"queue": "q"})  # type: ignore[arg-type]
    assert volcano.value.field == "volcano" and "a mapping of Volcano options" in str(volcano.value)
    with pytest.raises(SpecError) as modelarts:
        JobSpec(**BASE, modelarts=VolcanoOptions())  # type: ignore[arg-type]
    assert modelarts.value.field == "modelarts" and "obs_dir" in str(modelarts.value)
    assert JobSpec(**BASE).volcano == VolcanoOptions() and JobSpec(**BASE).modelarts is None


def test_a_sections_own_check_names_the_job_file_path() -> None:
    with pytest.raises(SpecError) as error:
        VolcanoOptions(namespace="Bad_NS")
    assert error.value.field == "volcano.namespace"
    with pytest.raises(SpecError) as retry:
        ModelArtsOptions(job_retry_num=129)
    assert retry.value.field == "modelarts.job_retry_num"


def test_jobspec_has_no_field_named_after_a_backend_and_keeps_its_shape() -> None:
    import dataclasses

    from malaunch.sdk.backends import BACKEND_NAMES

    assert not {item.name for item in dataclasses.fields(JobSpec)} & set(BACKEND_NAMES)
    spec = JobSpec(**BASE, modelarts=ModelArtsOptions(obs_dir="obs://bucket/x/"))
    assert spec.modelarts == ModelArtsOptions(obs_dir="obs://bucket/x/") and spec.volcano == VolcanoOptions()
    assert list(spec.sections) == ["volcano", "modelarts"]
    assert spec == JobSpec(**BASE, sections={"modelarts": ModelArtsOptions(obs_dir="obs://bucket/x/")})
    changed = spec.replace(volcano=VolcanoOptions(queue="q"))
    assert (changed.volcano.queue, changed.modelarts) == ("q", spec.modelarts)
    assert list(spec.to_dict())[11:14] == ["launcher", "volcano", "modelarts"]
    with pytest.raises(AttributeError):
        spec.local  # noqa: B018 (a backend without a section has no attribute)


def test_a_name_that_is_no_section_is_refused_in_one_line() -> None:
    with pytest.raises(SpecError) as error:
        JobSpec(**BASE, slurm={"partition": "p"})
    assert error.value.field == "slurm" and "volcano, modelarts" in str(error.value)
    assert "\n" not in str(error.value)
