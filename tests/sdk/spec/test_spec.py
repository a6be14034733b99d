"""Job spec validation: field paths and values in errors, did-you-mean, reserved env, Python == YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
from malaunch.sdk import Job, JobSpec, LauncherOptions, Resources, SpecError
from malaunch.sdk.spec.loader import LAUNCHER_ENV, load_job_file, load_job_text, spec_from_mapping
from malaunch.sdk.spec.model import RESERVED_ENV, DataSpec

BASE = {"name": "demo", "code_dir": "/code", "boot_file": "train.py"}


def load(text: str) -> JobSpec:
    return load_job_text(text, base_dir="/jobs", source="job.yaml")


def error_of(data: object) -> SpecError:
    with pytest.raises(SpecError) as info:
        spec_from_mapping(data, base_dir="/jobs")
    return info.value


def test_minimal_job_gets_defaults() -> None:
    spec = load("name: demo\ncode_dir: src\nboot_file: train.py\n")
    assert spec.code_dir == "/jobs/src"
    assert spec.run_method == "ranktable"
    assert spec.backend == "local"
    assert spec.resources == Resources(hosts=1, devices_per_host=1)
    assert spec.launcher == LauncherOptions()
    assert spec.args == () and dict(spec.env) == {}


def test_hosts_zero_names_field_and_value() -> None:
    err = error_of({**BASE, "resources": {"hosts": 0}})
    assert err.field == "resources.hosts"
    assert "resources.hosts: must be >= 1, got 0" in str(err)


@pytest.mark.parametrize(
    ("data", "field", "fragment"),
    [
        ({**BASE, "name": "bad name"}, "name", "'bad name'"),
        ({**BASE, "run_method": "mpirun"}, "run_method", "one of ranktable, torchrun, msrun, got 'mpirun'"),
        ({**BASE, "boot_file": "../escape.py"}, "boot_file", "inside it"),
        ({**BASE, "boot_file": "/abs/train.py"}, "boot_file", "relative to code_dir"),
        ({**BASE, "args": "not-a-list"}, "args", "list of strings"),
        ({**BASE, "args": [["nested"]]}, "args[0]", "string or a number"),
        ({**BASE, "resources": {"devices_per_host": -1}}, "resources.devices_per_host", "got -1"),
        ({**BASE, "resources": {"hosts": True}}, "resources.hosts", "whole number, got True"),
        ({**BASE, "resources": {"hosts": "2"}}, "resources.hosts", "whole number, got '2'"),
        ({**BASE, "launcher": {"master_port": 70000}}, "launcher.master_port", "<= 65535, got 70000"),
        ({**BASE, "launcher": {"grace_period": -1}}, "launcher.grace_period", "got -1"),
        ({**BASE, "launcher": {"msrun_rank_table": "yes"}}, "launcher.msrun_rank_table", "true or false"),
        ({**BASE, "launcher": {"torchrun_extra_params": "--a 'b"}}, "launcher.torchrun_extra_params", "quotes"),
        ({**BASE, "env": {"1BAD": "x"}}, "env.1BAD", "variable name"),
        ({**BASE, "env": {"X": [1]}}, "env.X", "string or a number"),
        ({**BASE, "inputs": [{"name": "data"}]}, "inputs[0].path", "required"),
        ({**BASE, "inputs": [{"name": "x-y", "path": "/d"}]}, "inputs[0].name", "identifier"),
        ({**BASE, "outputs": [{"name": "a"}, {"name": "a"}]}, "outputs[1].name", "already used by outputs[0]"),
        ({**BASE, "backend": "k8s"}, "backend", "got 'k8s'"),
        ({"code_dir": "/c", "boot_file": "t.py"}, "name", "is required"),
        ([1, 2], "(top level)", "mapping"),
    ],
)
def test_invalid_fields(data: object, field: str, fragment: str) -> None:
    err = error_of(data)
    assert err.field == field
    assert fragment in str(err)


@pytest.mark.parametrize(
    ("data", "field", "suggestion"),
    [
        ({**BASE, "resources": {"gpus": 2}}, "resources.gpus", "did you mean devices_per_host?"),
        ({**BASE, "resources": {"host": 2}}, "resources.host", "did you mean hosts?"),
        ({**BASE, "bootfile": "x.py"}, "bootfile", "did you mean boot_file?"),
        ({**BASE, "environment": {}}, "environment", "did you mean env?"),
        ({**BASE, "launcher": {"master-port": 1}}, "launcher.master-port", "did you mean master_port?"),
        ({**BASE, "Name": "x"}, "Name", "did you mean name?"),
    ],
)
def test_unknown_keys_suggest(data: object, field: str, suggestion: str) -> None:
    err = error_of(data)
    assert err.field == field
    assert "unknown field" in str(err) and suggestion in str(err)


@pytest.mark.parametrize("name", sorted(set(RESERVED_ENV) - set(LAUNCHER_ENV)))
def test_reserved_env_is_refused(name: str) -> None:
    err = error_of({**BASE, "env": {name: "1"}})
    assert err.field == f"env.{name}"
    assert "set by the backend" in str(err)


@pytest.mark.parametrize("name", sorted(LAUNCHER_ENV))
def test_launcher_env_is_refused_by_a_python_spec(name: str) -> None:
    with pytest.raises(SpecError, match="set by the backend"):
        JobSpec(name="demo", code_dir="/code", boot_file="train.py", env={name: "1"})


def test_platform_launcher_variables_in_env_become_fields() -> None:
    env = {
        "MA_RUN_METHOD": "TorchRun", "MA_TORCHRUN_MASTER_PORT": "18888",
        "MA_EXTRA_TORCHRUN_PARAMS": "--rdzv_conf=timeout=7200 --max_restarts 0", "MSRUN_CLUSTER_TIME_OUT": 300,
        "MS_RANKTABLE_ENABLE": "True", "MALAUNCH_GRACE_PERIOD": "5", "OMP_NUM_THREADS": "1",
    }  # fmt: skip
    spec = spec_from_mapping({**BASE, "env": env})
    assert spec.run_method == "torchrun"
    assert spec.launcher == LauncherOptions(
        master_port=18888, torchrun_extra_params=("--rdzv_conf=timeout=7200", "--max_restarts", "0"),
        msrun_cluster_time_out=300, msrun_rank_table=True, grace_period=5.0,
    )  # fmt: skip
    assert dict(spec.env) == {"OMP_NUM_THREADS": "1"}
    same = spec_from_mapping({**BASE, "launcher": {"master_port": 18888}, "env": {"MA_TORCHRUN_MASTER_PORT": "18888"}})
    assert same.launcher.master_port == 18888


@pytest.mark.parametrize(
    ("data", "field", "other"),
    [
        ({"launcher": {"master_port": 1234}, "env": {"MA_TORCHRUN_MASTER_PORT": "18888"}},
         "env.MA_TORCHRUN_MASTER_PORT", "launcher.master_port"),
        ({"run_method": "msrun", "env": {"MA_RUN_METHOD": "torchrun"}}, "env.MA_RUN_METHOD", "run_method"),
        ({"env": {"MA_TORCHRUN_MASTER_PORT": "1", "MALAUNCH_MASTER_PORT": "2"}}, "env.MALAUNCH_MASTER_PORT",
         "env.MA_TORCHRUN_MASTER_PORT"),
        ({"launcher": {"msrun_cluster_time_out": 60}, "env": {"MSRUN_CLUSTER_TIME_OUT": "600"}},
         "env.MSRUN_CLUSTER_TIME_OUT", "launcher.msrun_cluster_time_out"),
    ],
)  # fmt: skip
def test_launcher_variable_and_field_set_differently_is_an_error_naming_both(
    data: dict, field: str, other: str
) -> None:
    err = error_of({**BASE, **data})
    assert err.field == field and other in str(err) and field in str(err)


@pytest.mark.parametrize(
    ("name", "value"),
    [("MA_TORCHRUN_MASTER_PORT", "http"), ("MA_TORCHRUN_MASTER_PORT", "70000"), ("MS_RANKTABLE_ENABLE", "maybe"),
     ("MA_RUN_METHOD", "mpirun"), ("MSRUN_CLUSTER_TIME_OUT", "-2"), ("MA_EXTRA_TORCHRUN_PARAMS", "'open")],
)  # fmt: skip
def test_bad_launcher_variable_values_name_the_variable(name: str, value: str) -> None:
    err = error_of({**BASE, "env": {name: value}})
    assert err.field == f"env.{name}"


def test_reserved_env_points_to_the_field() -> None:
    assert "set resources.hosts instead" in str(error_of({**BASE, "env": {"MA_NUM_HOSTS": "2"}}))


def test_yaml_errors_name_the_file_and_line() -> None:
    with pytest.raises(SpecError) as info:
        load("name: demo\ncode_dir: [unclosed\n")
    assert str(info.value).startswith("job.yaml: line")
    with pytest.raises(SpecError) as info:
        load("name: a\nname: b\ncode_dir: x\nboot_file: y\n")
    assert "given twice" in str(info.value)


def test_numbers_become_strings_in_args_and_env() -> None:
    spec = spec_from_mapping({**BASE, "args": ["--lr", 0.1, 3], "env": {"SEED": 7}})
    assert spec.args == ("--lr", "0.1", "3")
    assert dict(spec.env) == {"SEED": "7"}


def test_extra_params_accept_string_or_list() -> None:
    a = spec_from_mapping({**BASE, "launcher": {"torchrun_extra_params": "--rdzv_conf 'timeout=7200'"}})
    b = spec_from_mapping({**BASE, "launcher": {"torchrun_extra_params": ["--rdzv_conf", "timeout=7200"]}})
    assert a.launcher.torchrun_extra_params == b.launcher.torchrun_extra_params == ("--rdzv_conf", "timeout=7200")


def test_relative_paths_resolve_against_job_file(tmp_path: Path) -> None:
    job = tmp_path / "sub" / "job.yaml"
    job.parent.mkdir()
    job.write_text(
        "name: x\ncode_dir: ../code\nboot_file: t.py\ninputs: [{name: data, path: data}, {name: remote, path: obs://b/d}]\n"
    )
    spec = load_job_file(str(job))
    assert spec.code_dir == str(tmp_path / "code")
    assert spec.inputs[0].path == str(tmp_path / "sub" / "data")
    assert spec.inputs[1].path == "obs://b/d"


def test_missing_job_file_is_a_spec_error(short_tmp: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_job_file(str(short_tmp / "nope.yaml"))  # the whole path is in the message
    assert "cannot be read" in str(info.value) and "nope.yaml" in str(info.value)


def test_dataclasses_validate_on_construction() -> None:
    with pytest.raises(SpecError) as info:
        Resources(hosts=0)
    assert info.value.field == "resources.hosts"
    with pytest.raises(SpecError):
        JobSpec(name="x", code_dir="/c", boot_file="t.py", run_method="slurm")
    with pytest.raises(SpecError) as info:
        JobSpec(name="x", code_dir="/c", boot_file="t.py", inputs=(DataSpec("a"),))
    assert info.value.field == "inputs[0].path"


def test_spec_is_frozen_and_replace_revalidates() -> None:
    spec = spec_from_mapping(BASE)
    with pytest.raises(AttributeError):
        spec.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.env["X"] = "1"  # type: ignore[index]
    with pytest.raises(SpecError):
        spec.replace(name="")


def test_to_dict_round_trips() -> None:
    data = {
        **BASE,
        "run_method": "msrun",
        "args": ["a"],
        "image": "swr.example/img:1",
        "resources": {"hosts": 2, "devices_per_host": 8, "flavor": "f", "pool": "p"},
        "env": {"A": "1"},
        "inputs": [{"name": "data_url", "path": "/d"}],
        "outputs": [{"name": "train_url", "path": None}],
        "launcher": {"msrun_rank_table": True, "msrun_extra_params": ["--bind_core=True"], "grace_period": 5},
    }
    spec = spec_from_mapping(data)
    assert spec_from_mapping(spec.to_dict()) == spec


def test_python_job_equals_yaml_job(tmp_path: Path) -> None:
    job_file = tmp_path / "job.yaml"
    job_file.write_text("name: demo\ncode_dir: .\nboot_file: train.py\nresources: {hosts: 2}\n")
    from_yaml = Job.from_yaml(str(job_file)).spec
    from_python = Job(name="demo", code_dir=str(tmp_path), boot_file="train.py", resources={"hosts": 2}).spec
    assert from_yaml == from_python
    assert (
        Job(name="demo", code_dir=str(tmp_path), boot_file="train.py", resources=Resources(hosts=2)).spec == from_python
    )
    with pytest.raises(SpecError) as info:
        Job(name="demo", code_dir=".", boot_file="t.py", resources={"gpus": 1})
    assert info.value.field == "resources.gpus"


def test_with_options_overrides_and_validates(tmp_path: Path) -> None:
    job = Job(name="demo", code_dir=str(tmp_path), boot_file="t.py")
    assert job.with_options(run_method="torchrun", backend=None).spec.run_method == "torchrun"
    with pytest.raises(SpecError):
        job.with_options(run_method="nope")
