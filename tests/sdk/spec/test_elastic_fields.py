"""Elastic torchrun, the SDK's side (issue 26 §2): ``launcher.min_hosts`` is validated (1..hosts, torchrun only),
becomes ``MALAUNCH_MIN_HOSTS`` on the backends that support it, Volcano's ``minAvailable`` with no pod-level
policy that would end or restart the job, and is refused by ModelArts at submit and at ``--dry-run``. Unset,
nothing changes. Pure, except the CLI checks, which run the real ``ma-submit``."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml
from malaunch.sdk import Job, SpecError, spec_from_mapping
from malaunch.sdk.backends.local.hostnet import LoopbackNetwork
from malaunch.sdk.backends.local.plan import plan_local
from malaunch.sdk.backends.modelarts.request import build_create_body
from malaunch.sdk.backends.volcano.manifest import render_manifest
from malaunch.sdk.backends.volcano.template import load_template
from malaunch.sdk.spec.contract import launcher_env
from malaunch.sdk.spec.model import LauncherOptions
from sdkutil import ma_submit
from volcano_checks import crd_errors, pod_template_errors

NAME = "MALAUNCH_MIN_HOSTS"
BASE: Dict[str, Any] = {
    "name": "demo",
    "code_dir": "/c",
    "boot_file": "train.py",
    "image": "reg.example/ml:1",
    "run_method": "torchrun",
    "resources": {"hosts": 3, "devices_per_host": 1, "flavor": "modelarts.vm.cpu.8u"},
    "modelarts": {"obs_dir": "obs://bucket/runs/"},
}


def _spec(min_hosts: Any = None, **changes: Any) -> Any:
    data = copy.deepcopy(BASE)
    data.update(changes)
    if min_hosts is not None:
        data["launcher"] = {"min_hosts": min_hosts}
    return spec_from_mapping(data)


def _manifest(spec: Any) -> Dict[str, Any]:
    text, source = load_template(spec.volcano.template)
    return render_manifest(spec, "demo-20261126-120000-abcdef", text, source)


@pytest.mark.parametrize("value", [1, 2, 3])
def test_min_hosts_from_one_to_hosts_is_taken(value: int) -> None:
    spec = _spec(value)
    assert spec.launcher.min_hosts == value
    assert spec.launcher.to_dict()["min_hosts"] == value
    assert spec_from_mapping(spec.to_dict()) == spec  # round trip


@pytest.mark.parametrize(
    ("value", "problem"),
    [(0, "must be >= 1"), (4, r"must be at most resources.hosts \(3\)"), ("two", "must be a whole number"),
     (True, "must be a whole number"), (1.5, "must be a whole number")],
)  # fmt: skip
def test_min_hosts_out_of_range_is_one_line_naming_the_field(value: Any, problem: str) -> None:
    with pytest.raises(SpecError, match=rf"^launcher\.min_hosts: {problem}") as caught:
        _spec(value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("method", ["ranktable", "msrun"])
def test_other_run_methods_are_refused_saying_why(method: str) -> None:
    with pytest.raises(SpecError) as caught:
        _spec(1, run_method=method)
    text = str(caught.value)
    assert text.startswith("launcher.min_hosts: needs run_method torchrun") and method in text
    assert "set run_method: torchrun" in text and "\n" not in text


def test_the_python_api_takes_it_as_the_job_file_does() -> None:
    job = Job(name="demo", code_dir="/c", boot_file="train.py", run_method="torchrun",
              resources={"hosts": 2}, launcher={"min_hosts": 1})  # fmt: skip
    assert job.spec.launcher.min_hosts == 1
    assert job.spec.launcher == LauncherOptions(min_hosts=1)
    with pytest.raises(SpecError, match=r"launcher\.min_hosts"):
        Job(name="demo", code_dir="/c", boot_file="train.py", resources={"hosts": 2}, launcher={"min_hosts": 1})


def test_env_may_not_set_it_and_names_the_field() -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_mapping({**BASE, "env": {NAME: "1"}})
    assert "env.MALAUNCH_MIN_HOSTS" in str(caught.value) and "launcher.min_hosts" in str(caught.value)


def test_unset_nothing_changes() -> None:
    spec = _spec()
    assert "min_hosts" not in spec.launcher.to_dict()  # the dry runs' JSON is as before the field
    assert NAME not in launcher_env(spec)
    assert NAME not in build_create_body(spec, "j-1")["algorithm"]["environments"]
    manifest = _manifest(spec)
    assert manifest["spec"]["minAvailable"] == manifest["spec"]["tasks"][0]["minAvailable"] == 3
    events = [policy.get("event") for policy in manifest["spec"]["tasks"][0]["policies"]]
    assert events[-2:] == ["PodFailed", "PodEvicted"]


def test_local_hosts_get_the_variable() -> None:
    request, _ = plan_local(_spec(2), job_id="j-1", home="/h", python="/usr/bin/python3",
                            network=LoopbackNetwork("j-1", 3))  # fmt: skip
    assert [host.env[NAME] for host in request.hosts] == ["2", "2", "2"]


def test_volcano_min_available_is_min_hosts_and_a_lost_pod_ends_nothing() -> None:
    spec = _spec(1, volcano={"not_retryable_exit_codes": [2, 3], "on_pod_failure": "abort"})
    manifest = _manifest(spec)
    task = manifest["spec"]["tasks"][0]
    assert (manifest["spec"]["minAvailable"], task["minAvailable"], task["replicas"]) == (1, 1, 3)
    # no PodFailed/PodEvicted policy (no RestartJob, no AbortJob for one pod); the exit-code aborts stay
    assert task["policies"] == [{"exitCode": 2, "action": "AbortJob"}, {"exitCode": 3, "action": "AbortJob"}]
    env = {item["name"]: item.get("value") for item in task["template"]["spec"]["containers"][0]["env"]}
    assert env[NAME] == "1"
    assert crd_errors(manifest) == []
    assert pod_template_errors(task["template"]) == []


def test_volcano_manifest_of_a_job_without_it_is_unchanged_by_the_template_placeholder() -> None:
    spec = _spec()
    manifest = _manifest(spec)
    packaged = yaml.safe_load(load_template(None)[0])
    assert packaged["spec"]["minAvailable"] == "{{min_available}}"
    assert manifest["spec"]["tasks"][0]["replicas"] == 3 and crd_errors(manifest) == []


def test_modelarts_refuses_it_in_one_line() -> None:
    with pytest.raises(SpecError) as caught:
        build_create_body(_spec(1), "j-1")
    text = str(caught.value)
    assert text.startswith("launcher.min_hosts: is not supported on ModelArts (the platform starts all")
    assert "remove launcher.min_hosts" in text and "\n" not in text


def _job_file(folder: Path, **launcher: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text("print('hi')\n")
    data = {**copy.deepcopy(BASE), "code_dir": ".", "launcher": launcher}
    job = folder / "job.yaml"
    job.write_text(yaml.safe_dump(data))
    return job


@pytest.mark.process
def test_modelarts_dry_run_refuses_it_with_exit_2(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    job = _job_file(tmp_path / "job", min_hosts=1)
    result = ma_submit(["--dry-run", "--backend", "modelarts", str(job)], cli_env)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "launcher.min_hosts: is not supported on ModelArts" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.process
def test_a_ranktable_job_file_with_it_is_refused_at_load(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    job = _job_file(tmp_path / "job", min_hosts=1)
    job.write_text(job.read_text().replace("run_method: torchrun", "run_method: ranktable"))
    result = ma_submit(["--dry-run", str(job)], cli_env)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "launcher.min_hosts: needs run_method torchrun" in lines[0], result.stderr
