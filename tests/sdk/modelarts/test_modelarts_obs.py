"""OBS and the checks before an upload, against moto's real S3 server and the fake ModelArts API on 127.0.0.1.

A missing bucket, a denied PutObject and a refused key each give one line naming the bucket/key and what to
do (exit 3 for OBS; JSON mode: a JSON error), with nothing uploaded and no job created; a wrong secret key is
found by one signed call before any upload. Uploads go by manifest: an unchanged re-upload is one request,
a changed one costs one request per changed file more.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from fake_modelarts import FakeModelArts
from malaunch.sdk import BackendError, load_job_file
from malaunch.sdk.backends.codefiles import select_code_files
from malaunch.sdk.backends.modelarts.backend import ModelArtsBackend
from malaunch.sdk.backends.modelarts.credentials import Credentials, Endpoints
from malaunch.sdk.backends.modelarts.obs import make_s3_client
from malaunch.sdk.backends.modelarts.upload import CodeUploader, manifest_key
from modelarts_env import AK, BUCKET, PROJECT, SK
from sdkutil import ma_submit
from test_modelarts_e2e import objects, write_job

pytestmark = pytest.mark.process


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("ma-submit: error:")]
    assert len(errors) == 1, stderr
    return errors[0]


def test_a_missing_bucket_is_one_line_before_any_upload(
    tmp_path: Path, fake_ma: FakeModelArts, s3: Any, ma_env: Dict[str, str]
) -> None:
    job = write_job(tmp_path, modelarts={"obs_dir": "obs://my-bucket/"})  # the templates' bucket, unchanged
    result = ma_submit([str(job)], ma_env)
    assert result.returncode == 3, result.stderr
    line = one_error_line(result.stderr)
    assert "the OBS bucket 'my-bucket' does not exist" in line and "obs://my-bucket/ddp-demo/code/" in line
    assert line.endswith("create it in the OBS console or set modelarts.obs_dir to a bucket you own")
    assert fake_ma.jobs == {} and objects(s3) == {}

    as_json = ma_submit(["--output", "json", str(job)], ma_env)
    assert as_json.returncode == 3
    data = json.loads(as_json.stdout)
    assert data["exit_code"] == 3 and "my-bucket" in data["error"]
    assert "Traceback" not in as_json.stderr


def test_a_denied_put_is_one_line(
    tmp_path: Path, fake_ma: FakeModelArts, moto_no_put: Tuple[str, str, str], ma_env: Dict[str, str]
) -> None:
    url, ak, sk = moto_no_put
    fake_ma.ak, fake_ma.sk = ak, sk  # the same key pair for the API and OBS, as on the platform
    env = dict(ma_env, MALAUNCH_OBS_ENDPOINT=url, HUAWEICLOUD_SDK_AK=ak, HUAWEICLOUD_SDK_SK=sk)
    env["HUAWEICLOUD_SDK_REGION"] = "us-east-1"  # moto checks signatures against its own region
    result = ma_submit([str(write_job(tmp_path))], env)
    assert result.returncode == 3, result.stderr
    line = one_error_line(result.stderr)
    assert f"OBS denied access to obs://{BUCKET}/jobs/ddp-demo/code/" in line and "(AccessDenied)" in line
    assert "grant them read and write access to the bucket" in line and sk not in result.stderr
    assert fake_ma.jobs == {}


def test_a_wrong_secret_key_uploads_nothing(
    tmp_path: Path, fake_ma: FakeModelArts, s3: Any, ma_env: Dict[str, str]
) -> None:
    result = ma_submit([str(write_job(tmp_path))], dict(ma_env, HUAWEICLOUD_SDK_SK="sk-WRONG-000000000000"))
    assert result.returncode == 2, result.stderr
    assert "ModelArts refused the credentials from the environment" in one_error_line(result.stderr)
    assert objects(s3) == {} and fake_ma.jobs == {}
    assert [(method, code) for method, _, code in fake_ma.calls] == [("POST", 401)]  # one cheap signed call


def test_an_unreachable_obs_endpoint_is_one_line(
    tmp_path: Path, fake_ma: FakeModelArts, ma_env: Dict[str, str]
) -> None:
    result = ma_submit([str(write_job(tmp_path))], dict(ma_env, MALAUNCH_OBS_ENDPOINT="http://127.0.0.1:9"))
    assert result.returncode == 3, result.stderr
    line = one_error_line(result.stderr)
    assert "cannot reach OBS at http://127.0.0.1:9" in line and "check MALAUNCH_OBS_ENDPOINT" in line
    assert fake_ma.jobs == {}


# -- the manifest ----------------------------------------------------------------------------------------------


def counted_uploader(url: str) -> Tuple[CodeUploader, List[str]]:
    creds = Credentials(AK, SK, PROJECT, "cn-north-4", "the test")
    client = make_s3_client(Endpoints("http://127.0.0.1:1", url), creds)
    sent: List[str] = []
    client.meta.events.register("before-send.s3.*", lambda request, **_: sent.append(request.method))
    return CodeUploader(client, creds, endpoint=url), sent


def test_an_unchanged_reupload_is_one_request_and_changes_cost_what_changed(
    tmp_path: Path, moto_s3: str, s3: Any
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    for index in range(300):
        (code / f"m{index:03d}.py").write_text(f"VALUE = {index}\n")
    target = f"obs://{BUCKET}/jobs/demo/code/"
    uploader, sent = counted_uploader(moto_s3)
    first = uploader.upload(select_code_files(str(code)), target)
    assert len(first.uploaded) == 300 and sent.count("PUT") == 301  # 300 files and the manifest
    stored = objects(s3)
    assert len(stored) == 300
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=manifest_key("jobs/demo/code/"))["Body"].read())
    assert manifest["files"]["m007.py"]["sha256"] and manifest["files"]["m007.py"]["size"] == len("VALUE = 7\n")

    sent.clear()
    again = uploader.upload(select_code_files(str(code)), target)
    assert (again.uploaded, len(again.skipped)) == ((), 300)
    assert sent == ["GET"]  # the manifest; no request per file

    (code / "m001.py").write_text("VALUE = 'changed'\n")
    (code / "new.py").write_text("NEW = 1\n")
    sent.clear()
    changed = uploader.upload(select_code_files(str(code)), target)
    assert sorted(changed.uploaded) == ["jobs/demo/code/m001.py", "jobs/demo/code/new.py"]
    assert sorted(sent) == ["GET", "PUT", "PUT", "PUT"]  # manifest, two files, the new manifest
    body = s3.get_object(Bucket=BUCKET, Key="jobs/demo/code/m001.py")
    assert body["Body"].read() == b"VALUE = 'changed'\n" and body["Metadata"]["sha256"]


def test_a_damaged_manifest_means_a_full_upload(tmp_path: Path, moto_s3: str, s3: Any) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "a.py").write_text("A = 1\n")
    (code / "big.bin").write_bytes(os.urandom(9 * 1024 * 1024))  # multipart
    s3.put_object(Bucket=BUCKET, Key="jobs/demo/code.malaunch-manifest.json", Body=b"{not json")
    uploader, _sent = counted_uploader(moto_s3)
    result = uploader.upload(select_code_files(str(code)), f"obs://{BUCKET}/jobs/demo/code/")
    assert sorted(result.uploaded) == ["jobs/demo/code/a.py", "jobs/demo/code/big.bin"]
    head = s3.head_object(Bucket=BUCKET, Key="jobs/demo/code/big.bin")
    assert head["ContentLength"] == 9 * 1024 * 1024 and head["ETag"].rstrip('"').endswith("-2")
    again = uploader.upload(select_code_files(str(code)), f"obs://{BUCKET}/jobs/demo/code/")
    assert again.uploaded == ()


def test_an_unchanged_resubmit_asks_obs_twice_whatever_the_number_of_files(
    tmp_path: Path, fake_ma: FakeModelArts, moto_s3: str, s3: Any, ma_env: Dict[str, str]
) -> None:
    job = write_job(tmp_path)
    for index in range(200):
        (tmp_path / "code" / "pkg" / f"layer_{index:03d}.py").write_text(f"SIZE = {index}\n")
    uploader, sent = counted_uploader(moto_s3)
    fake_ma.run_seconds = 0.0
    backend = ModelArtsBackend(environ=ma_env, s3_client=uploader.client, progress=None, status_interval=0.0)
    spec = load_job_file(str(job))
    backend.submit(spec)
    assert sent.count("PUT") >= 204
    sent.clear()
    backend.submit(spec)
    assert sent == ["HEAD", "GET"]  # the bucket check and the manifest, not one request per file
    assert len(fake_ma.jobs) == 2


@pytest.mark.parametrize("big", [False, True], ids=["small", "multipart"])
def test_a_code_file_that_vanishes_during_the_upload_is_one_line_and_no_upload_is_recorded(
    tmp_path: Path, moto_s3: str, s3: Any, big: bool
) -> None:
    """A file listed and hashed, then deleted before its turn (an editor's save, a build cleaning up): one line naming
    it and what to do, where a FileNotFoundError's traceback came out of ma-submit; no manifest is written, so the
    next upload sends every file again."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('train')\n")
    gone = code / "weights.bin"
    gone.write_bytes(os.urandom(9 * 1024 * 1024 if big else 100))
    files = select_code_files(str(code))
    gone.unlink()
    uploader, _ = counted_uploader(moto_s3)
    with pytest.raises(BackendError) as caught:
        uploader.upload(files, f"obs://{BUCKET}/jobs/demo/code/")
    text = str(caught.value)
    assert text.startswith(f"code file 'weights.bin' could not be read for the upload (No such file or directory: "
                           f"{gone}); it changed after it was listed, so nothing was submitted"), text  # fmt: skip
    assert text.endswith("leave the code folder alone while submitting and run the submit again")
    stored = s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    assert not any(item["Key"] == manifest_key("jobs/demo/code/") for item in stored)
