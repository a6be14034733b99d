"""One way a job id finds its backend, for every verb (issue 29 §4): ``delete`` as ``status``, and unique prefixes
on the cloud backends (from this machine's job index, else the backend's own list), through the real ``ma-submit``
against the loopback Kubernetes API and the fake ModelArts API."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest
import yaml
from fake_modelarts import FakeModelArts
from malaunch.sdk import attach
from malaunch.sdk.backends.job_index import JobIndex
from malaunch.sdk.backends.modelarts.backend import ModelArtsBackend
from malaunch.sdk.opening import backend_for
from modelarts_env import AK, PROJECT, SK
from sdkutil import ma_submit
from test_modelarts_api import body

pytestmark = pytest.mark.process


@pytest.fixture
def kube_env(cli_env: Dict[str, str], kubeconfig: Path, tmp_path: Path) -> Dict[str, str]:
    return {**cli_env, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}


@pytest.fixture
def ma_api_env(cli_env: Dict[str, str], fake_ma: FakeModelArts, tmp_path: Path) -> Dict[str, str]:
    return {
        **cli_env, "HUAWEICLOUD_SDK_AK": AK, "HUAWEICLOUD_SDK_SK": SK, "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT,
        "HUAWEICLOUD_SDK_REGION": "cn-north-4", "MALAUNCH_MODELARTS_ENDPOINT": fake_ma.url,
        "MALAUNCH_MODELARTS_PROFILE": str(tmp_path / "no-profile.ini"),
    }  # fmt: skip


def _volcano_job(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text("print('hi')\n")
    data = {
        "name": "vc-prefix", "run_method": "torchrun", "code_dir": ".", "boot_file": "train.py",
        "image": "reg.example/malaunch:0.1.0", "backend": "volcano", "resources": {"hosts": 1},
        "env": {"MALAUNCH_TEST_SCENARIO": "succeed"},
    }  # fmt: skip
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_volcano_prefixes_and_delete_find_the_cluster(kube_env: Dict[str, str], tmp_path: Path) -> None:
    submitted = ma_submit(["--detach", str(_volcano_job(tmp_path / "job"))], kube_env)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    assert job_id.startswith("ml/vc-prefix-")
    waited = ma_submit(["wait", job_id], kube_env)
    assert waited.returncode == 0, waited.stderr
    prefix = job_id[:-3]
    for args in (["status", prefix], ["status", "--backend", "volcano", prefix]):
        done = ma_submit(args, kube_env)
        assert done.returncode == 0, (args, done.stderr)
        assert f"id:        {job_id}" in done.stdout
    deleted = ma_submit(["delete", prefix], kube_env)  # no --backend: found as status finds it
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == f"deleted {job_id}"


def test_modelarts_prefixes_from_the_index_and_from_the_list(ma_api_env: Dict[str, str], home: Path) -> None:
    backend = ModelArtsBackend(environ=ma_api_env, progress=None)
    recorded = "ddp-demo-20261126-123159-0a1b2c"
    platform_id = backend.api.create_job(body(recorded))["metadata"]["id"]
    JobIndex.default(ma_api_env).record(recorded, "modelarts", platform_id=platform_id)
    console = "console-20261126-090000-3d4e5f"
    backend.api.create_job(body(console, token="tok2"))
    backend.api.create_job(body("console-b-20261126-090000-6a7b8c", token="tok3"))
    for args, expected in (
        (["status", "ddp-demo-20261126"], recorded),  # the index says modelarts, and which job
        (["status", "--backend", "modelarts", "ddp-demo-2026"], recorded),
        (["status", "--backend", "modelarts", "console-2026"], console),  # not in the index: the backend's list
    ):
        done = ma_submit(args, ma_api_env)
        assert done.returncode == 0, (args, done.stderr)
        assert f"id:        {expected}" in done.stdout
    ambiguous = ma_submit(["status", "--backend", "modelarts", "console"], ma_api_env)
    assert ambiguous.returncode == 2 and "job id prefix 'console' matches 2 jobs" in ambiguous.stderr
    refused = ma_submit(["delete", "ddp-demo"], ma_api_env)  # no --backend: the ModelArts backend answers
    assert refused.returncode == 3 and refused.stderr.count("\n") == 1, refused.stderr
    assert "cannot delete jobs (ddp-demo-20261126-123159-0a1b2c)" in refused.stderr and "'local'" not in refused.stderr


def test_attach_finds_the_backend_as_the_cli_does(ma_api_env: Dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    backend = ModelArtsBackend(environ=ma_api_env, progress=None)
    name = "attach-me-20261126-101010-abcdef"
    platform_id = backend.api.create_job(body(name))["metadata"]["id"]
    for key, value in ma_api_env.items():
        monkeypatch.setenv(key, value)
    JobIndex.default(ma_api_env).record(name, "modelarts", platform_id=platform_id)
    impl, ident = backend_for("attach-me")
    assert (impl.name, ident) == ("modelarts", name)
    handle = attach("attach-me")
    assert (handle.backend.name, handle.id) == ("modelarts", name)
    assert handle.status().id == name


def test_a_prefix_of_a_recorded_cloud_job_and_of_a_local_job_is_refused(
    ma_api_env: Dict[str, str], home: Path, tmp_path: Path
) -> None:
    """A prefix that names a recorded ModelArts job and also a local job (local jobs are not in the index) is not
    resolved to the cloud job silently: one line names both, and --backend or more of the id chooses."""
    backend = ModelArtsBackend(environ=ma_api_env, progress=None)
    recorded = "ddp-demo-20261126-123159-0a1b2c"
    platform_id = backend.api.create_job(body(recorded))["metadata"]["id"]
    JobIndex.default(ma_api_env).record(recorded, "modelarts", platform_id=platform_id)
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('local')\n")
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"name": "ddp-demo", "code_dir": str(code), "boot_file": "train.py"}))
    submitted = ma_submit(["--detach", "--backend", "local", str(job)], ma_api_env)
    assert submitted.returncode == 0, submitted.stderr
    local_id = submitted.stdout.strip()
    assert local_id.startswith("ddp-demo-") and local_id != recorded
    assert ma_submit(["wait", local_id], ma_api_env).returncode == 0
    refused = ma_submit(["status", "ddp-demo"], ma_api_env)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"matches job {recorded} (modelarts) and job {local_id} (local)" in refused.stderr
    assert "--backend modelarts / --backend local" in refused.stderr
    for args, expected in (
        (["status", "--backend", "local", "ddp-demo"], local_id),
        (["status", "--backend", "modelarts", "ddp-demo"], recorded),
        (["status", recorded[:-4]], recorded),  # more of the id: only the cloud job has it
    ):
        done = ma_submit(args, ma_api_env)
        assert done.returncode == 0, (args, done.stderr)
        assert f"id:        {expected}" in done.stdout
