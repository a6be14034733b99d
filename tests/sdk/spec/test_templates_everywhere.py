"""The product promise: each ``templates/*/job.yaml`` runs unchanged on every backend.

Every template is dry-run on every backend through the real ``ma-submit --backend X --dry-run --output json``
(no network, no cluster) and each plan is checked: the ModelArts create body against the official
``huaweicloudsdkmodelarts`` ``Job`` model, the Volcano manifest against the real CRD and the pod template
against the ``kubernetes`` client's models, the local plan for its hosts and variables. The launcher variables
are the same on all three (:mod:`malaunch.sdk.spec.contract`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict

import pytest
from ma_models import model_errors
from malaunch.sdk import load_job_file
from malaunch.sdk.plan import AUTO
from malaunch.sdk.spec.contract import LAUNCHER_VARIABLES, launcher_env
from modelarts_env import AK, PROJECT, SK
from sdkutil import TEMPLATES, ma_submit
from volcano_checks import crd_errors, pod_template_errors

pytestmark = pytest.mark.process

JOB_FILES = sorted(TEMPLATES.glob("*/job.yaml"))
BACKENDS = ("local", "modelarts", "volcano")


def dry_run(job: Path, backend: str, env: Dict[str, str]) -> Dict[str, Any]:
    done = ma_submit(["--backend", backend, "--dry-run", "--output", "json", str(job)], env)
    assert done.returncode == 0, f"{job.parent.name} on {backend}: {done.stderr}"
    assert "Traceback" not in done.stderr
    plan: Dict[str, Any] = json.loads(done.stdout)
    assert plan["backend"] == backend
    return plan


@pytest.fixture
def env(cli_env: Dict[str, str], tmp_path: Path) -> Dict[str, str]:
    """Credentials that look real and endpoints nobody listens on: a dry run must not need either."""
    out = {k: v for k, v in cli_env.items() if not k.startswith(("HUAWEICLOUD_", "KUBECONFIG"))}
    out.update(
        HUAWEICLOUD_SDK_AK=AK, HUAWEICLOUD_SDK_SK=SK, HUAWEICLOUD_SDK_PROJECT_ID=PROJECT,
        HUAWEICLOUD_SDK_REGION="cn-north-4", MALAUNCH_MODELARTS_ENDPOINT="http://127.0.0.1:9",
        MALAUNCH_MODELARTS_PROFILE=str(tmp_path / "no-profile.ini"), KUBECONFIG=str(tmp_path / "no-kubeconfig"),
    )  # fmt: skip
    return out


def test_the_three_templates_are_covered() -> None:
    assert {job.parent.name for job in JOB_FILES} == {"torchrun-ddp", "msrun-mindspore", "ranktable"}


@pytest.mark.parametrize("job", JOB_FILES, ids=lambda p: p.parent.name)
def test_every_template_plans_validly_on_every_backend(job: Path, env: Dict[str, str]) -> None:
    spec = load_job_file(str(job))
    expected = launcher_env(spec)
    plans = {backend: dry_run(job, backend, env) for backend in BACKENDS}

    local = plans["local"]["request"]
    assert len(local["hosts"]) == spec.resources.hosts
    for host in local["hosts"]:
        assert host["env"]["MA_RUN_METHOD"] == spec.run_method
        boot = host["argv"][-1 - len(spec.args)] if spec.args else host["argv"][-1]
        assert boot.endswith(spec.boot_file)
        fixed = {k: v for k, v in host["env"].items() if k in LAUNCHER_VARIABLES and v != AUTO}
        assert fixed == expected

    body = plans["modelarts"]["request"]["body"]
    assert model_errors(body, "Job") == []
    assert body["spec"]["resource"] == {"flavor_id": spec.resources.flavor, "node_count": spec.resources.hosts}
    assert body["algorithm"]["code_dir"].startswith("obs://")
    assert body["algorithm"]["command"].startswith("ma-entrypoint ")
    environments = body["algorithm"]["environments"]
    assert environments["MA_RUN_METHOD"] == spec.run_method
    assert {k: v for k, v in environments.items() if k in LAUNCHER_VARIABLES} == expected
    assert SK not in json.dumps(plans["modelarts"])

    manifest = plans["volcano"]["request"]["manifest"]
    assert crd_errors(manifest) == []
    (task,) = manifest["spec"]["tasks"]
    assert pod_template_errors(task["template"]) == []
    assert (task["replicas"], manifest["spec"]["minAvailable"]) == (spec.resources.hosts, spec.resources.hosts)
    (container,) = task["template"]["spec"]["containers"]
    assert container["command"][0] == "ma-entrypoint" and container["image"] == spec.image
    values = {item["name"]: item.get("value") for item in container["env"]}
    assert values["MA_RUN_METHOD"] == spec.run_method
    assert {k: v for k, v in values.items() if k in LAUNCHER_VARIABLES} == expected


def test_templates_keep_the_code_and_boot_file_they_name() -> None:
    for job in JOB_FILES:
        spec = load_job_file(str(job))
        assert os.path.isfile(os.path.join(spec.code_dir, spec.boot_file)), job


@pytest.mark.torch
@pytest.mark.usefixtures("cleanup_jobs")
def test_torchrun_template_derives_the_world_size_so_one_host_works(cli_env: Dict[str, str]) -> None:
    job = TEMPLATES / "torchrun-ddp" / "job.yaml"
    assert "--expect-world-size" not in job.read_text().split("args:")[-1].splitlines()[0]
    result = ma_submit(["--hosts", "1", str(job)], cli_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all_reduce OK across 2 ranks" in result.stdout
    # the shim's header counts the ranks torchrun starts, not the one torchrun process
    header = next(x for x in result.stdout.splitlines() if x.startswith("[host 0 ma-entrypoint] method=torchrun"))
    assert "ranks=2 (started by torchrun)" in header and "processes=1" not in header


def test_templates_say_what_each_cloud_backend_needs_changed() -> None:
    for job in JOB_FILES:
        text = job.read_text()
        assert "Unchanged on every backend" not in text, job
        assert "obs://my-bucket/" in text and "change" in text.lower(), job
