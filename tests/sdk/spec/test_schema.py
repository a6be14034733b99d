"""The JSON Schema for job files: shipped copy identical, every template valid, agrees with the loader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import jsonschema
import pytest
import yaml
from malaunch.sdk import SpecError
from malaunch.sdk.spec.loader import JOB_FIELDS, load_job_file, spec_from_mapping

REPO = Path(__file__).resolve().parents[3]
SCHEMA_FILE = REPO / "templates" / "job.schema.json"
PACKAGE_SCHEMA = REPO / "sdk" / "job.schema.json"
TEMPLATES = sorted((REPO / "templates").glob("*/job.yaml"))


def schema() -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads(SCHEMA_FILE.read_text())
    return data


def test_both_copies_are_what_the_core_and_the_backends_pieces_make() -> None:
    from malaunch.sdk.spec.schema import schema_text

    made = schema_text()
    for copy in (SCHEMA_FILE, PACKAGE_SCHEMA):
        assert copy.read_text() == made, (
            f"{copy} is not the schema the core and the backends make; run "
            "python -m malaunch.sdk.spec.schema templates/job.schema.json sdk/job.schema.json"
        )


def test_each_backends_section_is_its_own_piece() -> None:
    from malaunch.sdk.backends import option_sections

    doc = schema()
    for section in option_sections():
        piece = {key: value for key, value in section.schema.items() if key != "$defs"}
        assert doc["properties"][section.name] == piece
        assert set(piece["properties"]) == set(section.keys)
        for name, definition in section.schema.get("$defs", {}).items():
            assert doc["$defs"][name] == definition


def test_the_backends_are_the_registrys() -> None:
    from malaunch.sdk.backends import BACKEND_NAMES

    assert schema()["properties"]["backend"]["enum"] == list(BACKEND_NAMES)


def test_package_copy_is_package_data() -> None:
    from importlib.resources import files

    assert (files("malaunch.sdk") / "job.schema.json").read_bytes() == SCHEMA_FILE.read_bytes()


def test_schema_is_a_valid_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(schema())


def test_three_templates_exist() -> None:
    assert {p.parent.name for p in TEMPLATES} == {"torchrun-ddp", "msrun-mindspore", "ranktable"}


@pytest.mark.parametrize("job", TEMPLATES, ids=lambda p: p.parent.name)
def test_template_validates(job: Path) -> None:
    data = yaml.safe_load(job.read_text())
    jsonschema.validate(data, schema(), cls=jsonschema.Draft202012Validator)
    spec = load_job_file(str(job))
    assert (job.parent / spec.boot_file).is_file()


def test_schema_lists_exactly_the_loader_fields() -> None:
    doc = schema()
    assert set(doc["properties"]) == set(JOB_FIELDS[""])
    assert set(doc["properties"]["resources"]["properties"]) == set(JOB_FIELDS["resources"])
    assert set(doc["properties"]["launcher"]["properties"]) == set(JOB_FIELDS["launcher"])
    assert set(doc["$defs"]["data_list"]["items"]["properties"]) == set(JOB_FIELDS["data"])
    assert set(doc["properties"]["modelarts"]["properties"]) == set(JOB_FIELDS["modelarts"])


BASE = {"name": "demo", "code_dir": "/c", "boot_file": "t.py"}
BAD = [
    {**BASE, "resources": {"hosts": 0}},
    {**BASE, "resources": {"gpus": 1}},
    {**BASE, "run_method": "mpi"},
    {**BASE, "boot_file": "../x.py"},
    {**BASE, "boot_file": "/x.py"},
    {**BASE, "name": "has space"},
    {**BASE, "launcher": {"master_port": 0}},
    {**BASE, "launcher": {"msrun_rank_table": "yes"}},
    {**BASE, "env": {"1A": "x"}},
    {**BASE, "inputs": [{"path": "/d"}]},
    {**BASE, "backend": "slurm"},
    {**BASE, "extra": 1},
    {"code_dir": "/c", "boot_file": "t.py"},
]


@pytest.mark.parametrize("data", BAD)
def test_schema_and_loader_both_reject(data: Dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema(), cls=jsonschema.Draft202012Validator)
    with pytest.raises(SpecError):
        spec_from_mapping(data)
