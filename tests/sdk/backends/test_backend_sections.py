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
