"""The Volcano renderer: golden manifests, the real CRD schema, the client's pod models, the template rules,
the ``volcano:`` job-file section, and the phase -> state table. All pure: no cluster, no server."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any, Dict

import jsonschema
import pytest
import yaml
from malaunch.sdk import ConfigError, JobState, SpecError, spec_from_mapping
from malaunch.sdk.backends.volcano.backend import VolcanoBackend, volcano_job_name
from malaunch.sdk.backends.volcano.manifest import MAX_JOB_NAME, pod_policies, render_manifest
from malaunch.sdk.backends.volcano.options import VolcanoOptions
from malaunch.sdk.backends.volcano.phases import PHASES, job_state, root_cause
from malaunch.sdk.backends.volcano.template import fill_template, load_template
from malaunch.sdk.spec.loader import JOB_FIELDS
from volcano_checks import crd_errors, pod_template_errors

REPO = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "volcano"
UPDATE = os.environ.get("MALAUNCH_UPDATE_GOLDEN") == "1"

BASE: Dict[str, Any] = {"name": "demo", "code_dir": "/c", "boot_file": "train.py", "image": "reg.example/ml:1"}
CASES: Dict[str, Dict[str, Any]] = {
    "msrun-4-cpu": {**BASE, "run_method": "msrun", "resources": {"hosts": 4, "devices_per_host": 2}},
    "torchrun-gpu-full": {
        **BASE,
        "run_method": "torchrun",
        "args": ["--epochs", 3],
        "resources": {"hosts": 2, "devices_per_host": 8},
        "env": {"NCCL_DEBUG": "INFO"},
        "inputs": [{"name": "data_url", "path": "/data/in"}],
        "outputs": [{"name": "train_url", "path": "/data/out"}],
        "launcher": {"master_port": 29400, "torchrun_extra_params": "--max_restarts 0", "grace_period": 10},
        "volcano": {
            "namespace": "team-a", "queue": "gpu", "priority_class": "high", "service_account": "trainer",
            "image": "reg.example/ml:gpu", "code_volume": "code-pvc", "code_path": "/mnt/code",
            "device_resource": "nvidia.com/gpu", "max_retry": 1, "on_pod_failure": "abort",
            "not_retryable_exit_codes": [2, 3],
        },
    },
    "torchrun-checkpoint": {
        **BASE,
        "run_method": "torchrun",
        "resources": {"hosts": 3, "devices_per_host": 1},
        "checkpoint": {"keep": 3, "volume": "ckpt-pvc"},
        "volcano": {"code_volume": "code-pvc"},
    },
    "ranktable-ascend": {
        **BASE,
        "run_method": "ranktable",
        "resources": {"hosts": 2, "devices_per_host": 8},
        "volcano": {"device_resource": "huawei.com/Ascend910", "on_pod_eviction": "abort"},
    },
}  # fmt: skip


def manifest_for(data: Dict[str, Any], name: str = "demo-20261122-120000-abcdef") -> Dict[str, Any]:
    spec = spec_from_mapping(data)
    text, source = load_template(spec.volcano.template)
    return render_manifest(spec, name, text, source)


def task_of(manifest: Dict[str, Any]) -> Dict[str, Any]:
    task: Dict[str, Any] = manifest["spec"]["tasks"][0]
    return task


def env_of(manifest: Dict[str, Any]) -> Dict[str, Any]:
    container = task_of(manifest)["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_manifest(case: str) -> None:
    text = yaml.safe_dump(manifest_for(CASES[case]), sort_keys=False)
    golden = GOLDEN / f"{case}.yaml"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text(), f"{case}: rendering changed; MALAUNCH_UPDATE_GOLDEN=1 rewrites the golden files"


@pytest.mark.parametrize("case", sorted(CASES))
def test_manifest_passes_the_crd_and_the_pod_models(case: str) -> None:
    manifest = manifest_for(CASES[case])
    assert crd_errors(manifest) == []
    assert pod_template_errors(task_of(manifest)["template"]) == []


def test_the_strict_checks_can_fail() -> None:
    manifest = manifest_for(CASES["msrun-4-cpu"])
    task_of(manifest)["template"]["spec"]["containers"][0]["cmd"] = ["x"]
    manifest["spec"]["plugin"] = {}
    task_of(manifest)["policies"].append({"event": "PodCrashed", "action": "AbortJob"})
    assert len(crd_errors(manifest)) == 3
    errors = pod_template_errors(task_of(manifest)["template"])
    assert errors == ["template.spec.containers[0].cmd: not a field of V1Container"]
    bad = copy.deepcopy(task_of(manifest)["template"])
    del bad["spec"]["containers"][0]["cmd"]
    bad["spec"]["containers"][0]["env"][0]["value"] = 3
    assert pod_template_errors(bad) == ["template.spec.containers[0].env[0].value: expected str, got int"]


def test_msrun_4_hosts_has_the_gang_the_plugins_and_the_contract() -> None:
    manifest = manifest_for(CASES["msrun-4-cpu"])
    spec, task = manifest["spec"], task_of(manifest)
    assert (spec["minAvailable"], task["replicas"], task["minAvailable"]) == (4, 4, 4)
    assert spec["schedulerName"] == "volcano"
    assert spec["plugins"] == {"env": [], "svc": ["--publish-not-ready-addresses"]}
    assert task["name"] == "worker"
    env = env_of(manifest)
    assert env["MA_NUM_HOSTS"] == "4" and env["MA_NUM_GPUS"] == "2" and env["MA_RUN_METHOD"] == "msrun"
    assert env["MA_VJ_NAME"] == "demo-20261122-120000-abcdef" and env["MA_TASK_NAME"] == "worker"
    assert env["MA_CURRENT_INSTANCE_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    for name in ("VC_TASK_INDEX", "VC_WORKER_HOSTS", "VC_WORKER_NUM", "MA_MSRUN_MASTER_PORT"):
        assert name not in env  # the plugins set the first three; an open port keeps the shim's default
    container = task["template"]["spec"]["containers"][0]
    assert container["command"] == ["ma-entrypoint", "/home/ma-user/code/train.py"]
    assert "resources" not in container  # CPU: no device resource


def test_full_options_reach_the_manifest() -> None:
    manifest = manifest_for(CASES["torchrun-gpu-full"])
    spec, task = manifest["spec"], task_of(manifest)
    pod = task["template"]["spec"]
    container = pod["containers"][0]
    assert manifest["metadata"]["namespace"] == "team-a"
    assert (spec["queue"], spec["priorityClassName"], spec["maxRetry"]) == ("gpu", "high", 1)
    assert pod["serviceAccountName"] == "trainer"
    assert container["image"] == "reg.example/ml:gpu"
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
    assert {"name": "code", "mountPath": "/mnt/code"} in container["volumeMounts"]
    assert {"name": "code", "persistentVolumeClaim": {"claimName": "code-pvc"}} in pod["volumes"]
    assert container["command"] == [
        "ma-entrypoint", "/mnt/code/train.py", "--epochs", "3", "--data_url=/data/in", "--train_url=/data/out",
    ]  # fmt: skip
    env = env_of(manifest)
    assert env["MA_TORCHRUN_MASTER_PORT"] == "29400" and env["MA_EXTRA_TORCHRUN_PARAMS"] == "--max_restarts 0"
    assert env["MALAUNCH_GRACE_PERIOD"] == "10" and env["NCCL_DEBUG"] == "INFO" and env["MA_JOB_DIR"] == "/mnt"


def test_exit_code_policies_come_before_the_event_policies() -> None:
    opts = VolcanoOptions(not_retryable_exit_codes=(7, 2), on_pod_failure="restart", on_pod_eviction="abort")
    assert pod_policies(opts) == [
        {"exitCode": 7, "action": "AbortJob"},
        {"exitCode": 2, "action": "AbortJob"},
        {"event": "PodFailed", "action": "RestartJob"},
        {"event": "PodEvicted", "action": "AbortJob"},
    ]


def test_rendering_is_pure() -> None:
    spec = spec_from_mapping(CASES["torchrun-gpu-full"])
    before = copy.deepcopy(spec.to_dict())
    backend = VolcanoBackend(environ={})
    first = backend.plan(spec, job_id="demo-1", now=1.0)
    assert backend.plan(spec, job_id="demo-1", now=1.0) == first
    assert spec.to_dict() == before
    assert json.loads(first.render_json())["request"]["manifest"]["metadata"]["name"] == "demo-1"


def test_dry_run_text_is_yaml_with_a_commented_summary() -> None:
    plan = VolcanoBackend(environ={}).plan(spec_from_mapping(CASES["msrun-4-cpu"]), job_id="demo-1", now=0.0)
    text = plan.render()
    assert text.splitlines()[0].startswith("# job demo-1 (dry run")
    assert yaml.safe_load(text) == plan.request.manifest  # type: ignore[attr-defined]
    assert any("kubeconfig context's namespace" in note for note in plan.notes)


def test_a_custom_template_keeps_what_the_user_added(tmp_path: Path) -> None:
    text, _ = load_template(None)
    data = yaml.safe_load(text)
    task_of(data)["template"]["spec"]["nodeSelector"] = {"pool": "a100"}
    data["metadata"]["annotations"] = {"team": "vision-{{spec_name}}"}
    custom = tmp_path / "my-template.yaml"
    custom.write_text(yaml.safe_dump(data))
    manifest = manifest_for({**BASE, "volcano": {"template": str(custom)}})
    assert task_of(manifest)["template"]["spec"]["nodeSelector"] == {"pool": "a100"}
    assert manifest["metadata"]["annotations"] == {"team": "vision-demo"}
    assert crd_errors(manifest) == []


def test_template_fill_rules() -> None:
    template = {"a": "{{n}}", "b": "x-{{s}}", "c": ["{{none}}", 1], "d": "{{empty}}", "e": {"f": "{{none}}"}}
    values = {"n": 4, "s": "y", "none": None, "empty": []}
    assert fill_template(template, values, "t") == {"a": 4, "b": "x-y", "c": [1], "e": {}}
    assert template["a"] == "{{n}}"
    with pytest.raises(ConfigError, match="unknown placeholder"):
        fill_template({"a": "{{nope}}"}, values, "t.yaml")
    with pytest.raises(ConfigError, match="whole value"):
        fill_template({"a": "x{{empty}}"}, values, "t.yaml")


@pytest.mark.parametrize(
    ("data", "name", "match"),
    [
        ({**BASE, "image": None}, "demo-1", "needs a container image"),
        ({**BASE, "inputs": [{"name": "d", "path": "obs://b/d"}]}, "demo-1", "inputs\\[0\\].path"),
        ({**BASE, "run_method": "ranktable", "resources": {"devices_per_host": 0}}, "demo-1", "rank table"),
        (BASE, "Demo_1", "volcano job name"),
        (BASE, "d" * (MAX_JOB_NAME + 1), "at most"),
    ],
)
def test_jobs_volcano_cannot_run_are_refused(data: Dict[str, Any], name: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        manifest_for(data, name)


def test_a_template_without_the_worker_task_is_refused(tmp_path: Path) -> None:
    text, _ = load_template(None)
    custom = tmp_path / "t.yaml"
    custom.write_text(text.replace("- name: worker", "- name: trainer"))
    with pytest.raises(ConfigError, match="exactly one task named 'worker'"):
        manifest_for({**BASE, "volcano": {"template": str(custom)}})
    with pytest.raises(ConfigError, match="cannot be read"):
        manifest_for({**BASE, "volcano": {"template": str(tmp_path / "missing.yaml")}})


def test_job_names_are_host_name_safe() -> None:
    name = volcano_job_name("9_Very_Long_Name_" * 5, 0.0, "abcdef")
    assert name.startswith("j-9-very-long-name") and name.endswith("-19700101-000000-abcdef")
    assert len(name) <= MAX_JOB_NAME
    manifest_for(BASE, name)  # accepted


@pytest.mark.parametrize(
    ("volcano", "field"),
    [
        ({"namespace": "Team_A"}, "volcano.namespace"),
        ({"code_path": "code"}, "volcano.code_path"),
        ({"device_resource": "gpu"}, "volcano.device_resource"),
        ({"max_retry": -1}, "volcano.max_retry"),
        ({"on_pod_failure": "retry"}, "volcano.on_pod_failure"),
        ({"not_retryable_exit_codes": [7, 7]}, "volcano.not_retryable_exit_codes[1]"),
        ({"not_retryable_exit_codes": [256]}, "volcano.not_retryable_exit_codes[0]"),
        ({"not_retryable_exit_codes": 7}, "volcano.not_retryable_exit_codes"),
        ({"queu": "x"}, "volcano.queu"),
    ],
)
def test_volcano_section_is_validated(volcano: Dict[str, Any], field: str) -> None:
    data = {**BASE, "volcano": volcano}
    with pytest.raises(SpecError) as info:
        spec_from_mapping(data)
    assert info.value.field == field
    schema = json.loads((REPO / "templates" / "job.schema.json").read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema, cls=jsonschema.Draft202012Validator)


def test_null_means_the_default_and_an_empty_list_means_none() -> None:
    assert spec_from_mapping({**BASE, "volcano": {"not_retryable_exit_codes": None}}).volcano == VolcanoOptions()
    assert (
        spec_from_mapping({**BASE, "volcano": {"not_retryable_exit_codes": []}}).volcano.not_retryable_exit_codes == ()
    )
    assert spec_from_mapping({**BASE, "volcano": None}).volcano == VolcanoOptions()


def test_volcano_section_round_trips_and_matches_the_schema() -> None:
    spec = spec_from_mapping(CASES["torchrun-gpu-full"])
    assert spec_from_mapping(spec.to_dict()) == spec
    schema = json.loads((REPO / "templates" / "job.schema.json").read_text())
    assert set(schema["properties"]["volcano"]["properties"]) == set(JOB_FIELDS["volcano"])
    jsonschema.validate(CASES["torchrun-gpu-full"], schema, cls=jsonschema.Draft202012Validator)


def test_the_packaged_template_is_the_one_in_templates() -> None:
    from importlib.resources import files

    shipped = (files("malaunch.sdk.backends.volcano") / "job-template.yaml").read_text()
    assert shipped == (REPO / "templates" / "volcano" / "job-template.yaml").read_text()


@pytest.mark.parametrize(
    ("phase", "code", "state"),
    [
        ("", None, JobState.PENDING),
        ("Pending", None, JobState.PENDING),
        ("Running", None, JobState.RUNNING),
        ("Restarting", 7, JobState.RUNNING),
        ("Completing", None, JobState.RUNNING),
        ("Aborting", 7, JobState.RUNNING),
        ("Terminating", None, JobState.RUNNING),
        ("Completed", None, JobState.SUCCEEDED),
        ("Failed", 7, JobState.FAILED),
        ("Aborted", None, JobState.STOPPED),
        ("Aborted", 7, JobState.FAILED),
        ("Aborted", 143, JobState.STOPPED),
        ("Aborted", 137, JobState.FAILED),
        ("Terminated", None, JobState.STOPPED),
        ("Terminated", 1, JobState.FAILED),
        ("Hibernating", None, JobState.UNKNOWN),
    ],
)
def test_phase_to_state(phase: str, code: Any, state: JobState) -> None:
    assert job_state(phase, code) is state


def test_every_documented_phase_is_mapped() -> None:
    documented = {"Pending", "Running", "Restarting", "Completing", "Completed", "Aborting", "Aborted",
                  "Terminating", "Terminated", "Failed"}  # fmt: skip
    assert documented <= set(PHASES)


def _pod(index: int, code: int, finished: str) -> Dict[str, Any]:
    return {
        "metadata": {"name": f"j-worker-{index}", "annotations": {"volcano.sh/task-index": str(index)}},
        "status": {"containerStatuses": [
            {"name": "worker", "state": {"terminated": {"exitCode": code, "finishedAt": finished}}},
        ]},
    }  # fmt: skip


def test_root_cause_is_the_first_failure_and_not_the_teardown() -> None:
    early, late = "2026-01-01T00:00:01Z", "2026-01-01T00:00:05Z"
    assert root_cause([_pod(0, 143, late), _pod(1, 7, early), _pod(2, 0, early)]) == (7, "j-worker-1")
    assert root_cause([_pod(0, 143, early), _pod(1, 7, early)]) == (7, "j-worker-1")  # same second
    assert root_cause([_pod(0, 0, early)]) == (None, "")


def test_every_variable_the_manifest_sets_is_in_the_contract_table() -> None:
    text = (REPO / "docs" / "entrypoint.md").read_text()
    table = text[text.index("**Inputs**") : text.index("**Outputs**")]
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", table))
    manifest = manifest_for(CASES["torchrun-gpu-full"])
    set_here = set(env_of(manifest)) - set(CASES["torchrun-gpu-full"]["env"])
    assert "MA_NUM_HOSTS" in set_here and set_here - documented == set()
