"""Small parts of the ModelArts backend and what it shares: credentials and endpoints, phases, code-file
selection, the job index."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict

import pytest
from malaunch.sdk import ConfigError, available_backends, get_backend
from malaunch.sdk.backends.codefiles import file_sha256, select_code_files
from malaunch.sdk.backends.job_index import JobIndex
from malaunch.sdk.backends.modelarts.backend import ModelArtsBackend
from malaunch.sdk.backends.modelarts.credentials import is_ip_endpoint, load_credentials, load_endpoints
from malaunch.sdk.backends.modelarts.phases import job_state, status_from_job
from malaunch.sdk.status import HostState, JobState

ENV = {
    "HUAWEICLOUD_SDK_AK": "AK1234567",
    "HUAWEICLOUD_SDK_SK": "very-secret",
    "HUAWEICLOUD_SDK_PROJECT_ID": "p1",
    "HUAWEICLOUD_SDK_REGION": "cn-north-4",
}


def test_credentials_from_env_hide_the_secret() -> None:
    creds = load_credentials(dict(ENV, HUAWEICLOUD_SDK_SECURITY_TOKEN="tok"))
    assert (creds.ak, creds.project_id, creds.region, creds.security_token) == ("AK1234567", "p1", "cn-north-4", "tok")
    assert "very-secret" not in repr(creds) and "tok" not in repr(creds)
    assert "HUAWEICLOUD_SDK_AK" in creds.source


def test_incomplete_env_names_the_missing_variable() -> None:
    with pytest.raises(ConfigError) as caught:
        load_credentials({k: v for k, v in ENV.items() if k != "HUAWEICLOUD_SDK_PROJECT_ID"})
    assert "HUAWEICLOUD_SDK_PROJECT_ID is not set" in str(caught.value)


def test_profile_file(tmp_path: Path) -> None:
    profile = tmp_path / "modelarts.ini"
    profile.write_text("[default]\nak = AKP\nsk = secret-p\nproject_id = p2\nregion = ap-southeast-1\n")
    os.chmod(profile, 0o644)
    with pytest.raises(ConfigError) as caught:
        load_credentials({"MALAUNCH_MODELARTS_PROFILE": str(profile)})
    assert "can be read by others" in str(caught.value) and "chmod 600" in str(caught.value)
    os.chmod(profile, 0o600)
    creds = load_credentials({"MALAUNCH_MODELARTS_PROFILE": str(profile)})
    assert (creds.ak, creds.region) == ("AKP", "ap-southeast-1") and str(profile) in creds.source
    with pytest.raises(ConfigError) as missing:
        load_credentials({"MALAUNCH_MODELARTS_PROFILE": str(tmp_path / "none.ini")})
    assert "no ModelArts credentials found" in str(missing.value)


def test_endpoints() -> None:
    public = load_endpoints("cn-north-4", {})
    assert public.modelarts == "https://modelarts.cn-north-4.myhuaweicloud.com"
    assert public.obs == "https://obs.cn-north-4.myhuaweicloud.com"
    assert not is_ip_endpoint(public.obs)
    local = load_endpoints(
        "r", {"MALAUNCH_MODELARTS_ENDPOINT": "http://127.0.0.1:8080/", "MALAUNCH_OBS_ENDPOINT": "http://[::1]:9000"}
    )
    assert local.modelarts == "http://127.0.0.1:8080" and is_ip_endpoint(local.obs)
    with pytest.raises(ConfigError):
        load_endpoints("r", {"MALAUNCH_OBS_ENDPOINT": "ftp://x/path"})


@pytest.mark.parametrize(
    ("phase", "secondary", "state"),
    [
        ("Creating", "Creating", JobState.PENDING),
        ("Pending", "Queuing", JobState.PENDING),
        ("Running", "Running", JobState.RUNNING),
        ("Terminating", "Terminating", JobState.RUNNING),
        ("Completed", "Completed", JobState.SUCCEEDED),
        ("Failed", "Failed", JobState.FAILED),
        ("Abnormal", "CreateFailed", JobState.FAILED),
        ("Terminated", "Terminated", JobState.STOPPED),
        ("Hibernating", "", JobState.UNKNOWN),
    ],
)
def test_phases(phase: str, secondary: str, state: JobState) -> None:
    assert job_state(phase, secondary) is state


def job(phase: str, **status: Any) -> Dict[str, Any]:
    return {
        "metadata": {"id": "u1", "name": "n"},
        "status": {"phase": phase, "tasks": ["worker-0", "worker-1"], **status},
    }


def test_status_exit_codes() -> None:
    failed = status_from_job(
        job("Failed", task_statuses=[{"task": "worker-0", "exit_code": 0}, {"task": "worker-1", "exit_code": 3}])
    )
    assert (failed.state, failed.exit_code) == (JobState.FAILED, 3)
    assert "worker-1 exited with code 3" in failed.message
    assert [h.exit_code for h in failed.hosts] == [0, 3]
    assert status_from_job(job("Failed")).exit_code == 1
    assert status_from_job(job("Completed")).exit_code == 0
    running = status_from_job(job("Running"))
    assert running.exit_code is None and {h.state for h in running.hosts} == {HostState.RUNNING}
    odd = status_from_job(job("Sleeping", secondary_phase="Dozing"))
    assert odd.state is JobState.UNKNOWN and odd.raw_state == "Sleeping/Dozing"


def test_code_files_excludes_and_hashes(tmp_path: Path) -> None:
    root = tmp_path / "code"
    for rel in ("a.py", "pkg/b.py", "pkg/__pycache__/b.pyc", ".git/HEAD", "logs/x.log", "keep.log", "data/big.bin"):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rel)
    (root / ".malaunchignore").write_text("*.log\n!keep.log\ndata/\n")
    files = select_code_files(str(root))
    assert [f.relpath for f in files] == [".malaunchignore", "a.py", "keep.log", "pkg/b.py"]
    assert files[1].sha256 == file_sha256(str(root / "a.py")) and files[1].size == 4
    assert select_code_files(str(root)) == files


def test_job_index(tmp_path: Path) -> None:
    index = JobIndex.default({"MALAUNCH_HOME": str(tmp_path)})
    assert index.backend_of("x") is None
    index.record("u1", "modelarts", name="job-a")
    index.record("u2", "modelarts")
    assert index.backend_of("u1") == "modelarts" and index.entries()["u1"]["name"] == "job-a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job-index.json", "job-index.json.lock"]
    Path(index.path).write_text("{not json")
    assert index.entries() == {}
    Path(index.path).write_text(json.dumps({"jobs": {"a": {"backend": 3}, "b": {"backend": "local"}}}))
    assert index.entries() == {"b": {"backend": "local"}}


def test_registered_by_name(tmp_path: Path) -> None:
    assert "modelarts" in available_backends()
    environ = {
        "MALAUNCH_HOME": str(tmp_path),
        "MALAUNCH_MODELARTS_ENDPOINT": "http://127.0.0.1:9",
        "MALAUNCH_OBS_ENDPOINT": "http://127.0.0.1:9",
    }
    backend = get_backend("modelarts", environ=environ, progress=None)
    assert isinstance(backend, ModelArtsBackend) and backend.endpoints.modelarts == "http://127.0.0.1:9"


def test_obs_client_settings() -> None:
    from malaunch.sdk.backends.modelarts.credentials import Credentials, Endpoints
    from malaunch.sdk.backends.modelarts.obs import make_s3_client

    creds = Credentials("AK", "SK", "p", "cn-north-4", "the test")
    public = make_s3_client(Endpoints("https://m", "https://obs.cn-north-4.myhuaweicloud.com"), creds)
    config = public.meta.config
    assert config.signature_version == "s3v4"
    assert (config.request_checksum_calculation, config.response_checksum_validation) == (
        "when_required",
        "when_required",
    )
    url = public.generate_presigned_url("get_object", Params={"Bucket": "my-bucket", "Key": "a/b.py"})
    assert url.startswith("https://my-bucket.obs.cn-north-4.myhuaweicloud.com/a/b.py?")  # virtual host
    assert "X-Amz-Algorithm=AWS4-HMAC-SHA256" in url and "cn-north-4" in url
    local = make_s3_client(Endpoints("https://m", "http://127.0.0.1:9000"), creds)
    url = local.generate_presigned_url("get_object", Params={"Bucket": "my-bucket", "Key": "a/b.py"})
    assert url.startswith("http://127.0.0.1:9000/my-bucket/a/b.py?")  # path style for an IP endpoint


def test_the_root_cause_task_wins_over_terminated_peers() -> None:
    codes = [{"task": "worker-0", "exit_code": 143}, {"task": "worker-1", "exit_code": 3}]
    status = status_from_job(job("Failed", task_statuses=codes))
    assert status.exit_code == 3 and "worker-1" in status.message
    only_killed = status_from_job(job("Failed", task_statuses=[{"task": "worker-0", "exit_code": 137}]))
    assert only_killed.exit_code == 137
