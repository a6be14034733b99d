"""The ModelArts backend end to end: the real ``ma-submit`` against moto's S3 server and the fake ModelArts API,
both on 127.0.0.1. Uploads (multipart, excludes, skip unchanged), one job through a 500 and a dropped
connection, logs, exit codes, status/logs/list/stop without --backend, dry-run, a wrong key, and the secret
key nowhere."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml
from fake_modelarts import FakeModelArts
from modelarts_env import BUCKET, SK
from sdkutil import VENV_BIN, RecordedRuns, ma_submit, wait_for

pytestmark = pytest.mark.process

BIG = 12 * 1024 * 1024


def write_job(folder: Path, **extra: Any) -> Path:
    """A 2-host torchrun job for ModelArts with a 12 MB file, ignorable files and a .malaunchignore."""
    code = folder / "code"
    (code / "pkg").mkdir(parents=True)
    (code / "train.py").write_text("import torch.distributed\nprint('training')\n")
    (code / "pkg" / "model.py").write_text("LAYERS = 2\n")
    (code / "weights.bin").write_bytes(os.urandom(BIG))
    (code / ".git").mkdir()
    (code / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (code / "__pycache__").mkdir()
    (code / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0" * 10)
    (code / "debug.log").write_text("not uploaded\n")
    (code / ".malaunchignore").write_text("*.log\n")
    data: Dict[str, Any] = {
        "name": "ddp-demo",
        "backend": "modelarts",
        "run_method": "torchrun",
        "code_dir": "code",
        "boot_file": "train.py",
        "args": ["--epochs", "3"],
        "image": "swr.cn-north-4.myhuaweicloud.com/team/malaunch-torch:1.0",
        "resources": {"hosts": 2, "flavor": "modelarts.vm.cpu.8u"},
        "env": {"TRAIN_MODE": "fast"},
        "outputs": [{"name": "train_url"}],
        "modelarts": {"obs_dir": f"obs://{BUCKET}/jobs/"},
    }
    data.update(extra)
    job = folder / "job.yaml"
    job.write_text(yaml.safe_dump(data))
    return job


def objects(client: Any) -> Dict[str, Dict[str, Any]]:
    """The bucket's objects but the upload manifests."""
    listed = client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return {item["Key"]: item for item in listed if not item["Key"].endswith(".malaunch-manifest.json")}


def assert_clean(fake: FakeModelArts) -> None:
    assert fake.signature_failures == []
    assert fake.body_errors == []


def test_submit_follow_resubmit_fail_stop(
    tmp_path: Path, fake_ma: FakeModelArts, s3: Any, ma_env: Dict[str, str]
) -> None:
    run = RecordedRuns(ma_env)
    outputs = run.outputs

    job = write_job(tmp_path)
    fake_ma.faults = {"create": ["500", "drop"], "get": ["429"]}

    # 1. upload, create once through a 500 and a dropped connection, follow to Completed with logs.
    first = run([str(job)])
    assert first.returncode == 0, first.stderr
    assert len(fake_ma.jobs) == 1
    # a 500, then a create whose answer was dropped; the third attempt found the job by name + token instead
    assert fake_ma.count("POST", "/training-job-searches") >= 2
    assert [s for m, p, s in fake_ma.calls if m == "POST" and p.endswith("/training-jobs")] == [500, 201]
    (job_id,) = fake_ma.jobs
    lines = first.stdout.splitlines()
    for host in (0, 1):
        assert f"[host {host}] worker-{host} step 0" in lines
        assert f"[host {host}] worker-{host} done" in lines
    assert "SUCCEEDED" in first.stderr and "exit code 0" in first.stderr
    assert any(code == 429 for _, _, code in fake_ma.calls)
    stored = objects(s3)
    prefix = "jobs/ddp-demo/code/"
    assert set(stored) == {prefix + name for name in ("train.py", "pkg/model.py", "weights.bin", ".malaunchignore")}
    head = s3.head_object(Bucket=BUCKET, Key=prefix + "weights.bin")
    assert re.search(r"-\d+\"?$", head["ETag"]), f"12 MB file not multipart: {head['ETag']}"
    assert head["ContentLength"] == BIG
    body = fake_ma.jobs[job_id].body
    assert body["spec"]["resource"] == {"flavor_id": "modelarts.vm.cpu.8u", "node_count": 2}
    assert body["algorithm"]["environments"]["MA_RUN_METHOD"] == "torchrun"
    assert body["algorithm"]["command"].startswith("ma-entrypoint /home/ma-user/modelarts/user-job-dir/code/train.py")

    # 2. the same job failing with task exit code 3; unchanged code uploads nothing.
    fake_ma.outcome = ("fail", 3)
    second = run([str(job)])
    assert second.returncode == 3, second.stderr
    assert "0 file(s) uploaded" in second.stderr and "4 unchanged" in second.stderr
    assert {k: v["LastModified"] for k, v in objects(s3).items()} == {k: v["LastModified"] for k, v in stored.items()}
    failed_id = next(j for j in fake_ma.jobs if j != job_id)
    assert "[host 1] worker-1 exiting with code 3" in second.stdout.splitlines()

    # 3. status / logs / wait / list work without --backend (the job index) and with it.
    status = run(["status", "--output", "json", failed_id])
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert (data["state"], data["exit_code"], data["backend"]) == ("FAILED", 3, "modelarts")
    logs = run(["logs", failed_id])
    assert logs.returncode == 0 and "[host 0] worker-0 step 4" in logs.stdout.splitlines()
    assert run(["wait", failed_id]).returncode == 3
    followed = run(["logs", "-f", "--backend", "modelarts", failed_id])
    assert followed.returncode == 0 and followed.stdout == logs.stdout
    listed = run(["list", "--backend", "modelarts", "--output", "json"])
    assert listed.returncode == 0, listed.stderr
    names = {fake_ma.jobs[platform_id].body["metadata"]["name"] for platform_id in (job_id, failed_id)}
    assert {item["id"] for item in json.loads(listed.stdout)} == names  # one id: the name the plan showed

    # 4. stop terminates a running job.
    fake_ma.outcome = ("hang", 0)
    detached = run(["--detach", str(job)])
    assert detached.returncode == 0, detached.stderr
    running_id = detached.stdout.strip()  # the job's name, as the plan shows it
    (running,) = [job for job in fake_ma.jobs.values() if job.body["metadata"]["name"] == running_id]
    assert running.outcome[0] == "hang"
    text_status = run(["status", running_id])
    assert text_status.returncode == 0 and "pid None" not in text_status.stdout
    assert f"id:        {running_id}" in text_status.stdout
    follow = run(["logs", "--backend", "modelarts", running_id])
    assert follow.returncode == 0
    stopped = run(["stop", running_id])
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.strip() == f"job {running_id} STOPPED"
    assert running.phase()[0] == "Terminated"
    assert fake_ma.count("POST", "/actions") == 1
    assert run(["stop", running_id]).returncode == 0  # idempotent: no second terminate
    assert fake_ma.count("POST", "/actions") == 1

    assert_clean(fake_ma)
    assert fake_ma.signature_checks >= 20
    assert not [text for text in fake_ma.seen_text if SK in text]
    assert_secret_nowhere(outputs, tmp_path, ma_env)


def assert_secret_nowhere(outputs: List[str], tmp_path: Path, env: Dict[str, str]) -> None:
    for text in outputs:
        assert SK not in text
    for root in (tmp_path, Path(env["MALAUNCH_HOME"])):
        for path in root.rglob("*"):
            if path.is_file() and path.stat().st_size < 1 << 20:
                assert SK.encode() not in path.read_bytes(), f"secret key found in {path}"


def test_dry_run_touches_no_network(tmp_path: Path, fake_ma: FakeModelArts, s3: Any, ma_env: Dict[str, str]) -> None:
    job = write_job(tmp_path, backend="local")
    result = ma_submit(["--backend", "modelarts", "--dry-run", "--output", "json", str(job)], ma_env)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    request = plan["request"]
    assert request["method"] == "POST"
    assert request["url"] == f"{fake_ma.url}/v2/{ma_env['HUAWEICLOUD_SDK_PROJECT_ID']}/training-jobs"
    assert request["body"]["metadata"]["name"] == plan["job_id"]
    assert request["body"]["spec"]["resource"]["node_count"] == 2
    assert request["uploads"] == [{"source": str(tmp_path / "code"), "target": f"obs://{BUCKET}/jobs/ddp-demo/code/"}]
    text = ma_submit(["--backend", "modelarts", "--dry-run", str(job)], ma_env)
    assert text.returncode == 0 and f"POST {fake_ma.url}/v2/" in text.stdout
    assert fake_ma.calls == [] and objects(s3) == {}  # neither the API nor OBS was asked anything
    for output in (result.stdout, result.stderr, text.stdout, text.stderr):
        assert SK not in output
    no_creds = {k: v for k, v in ma_env.items() if not k.startswith("HUAWEICLOUD_")}
    bare = ma_submit(["--backend", "modelarts", "--dry-run", "--output", "json", str(job)], no_creds)
    assert bare.returncode == 0, bare.stderr
    assert "/v2/{project_id}/training-jobs" in json.loads(bare.stdout)["request"]["url"]


def test_wrong_secret_key_is_one_clear_line(
    tmp_path: Path, fake_ma: FakeModelArts, s3: Any, ma_env: Dict[str, str]
) -> None:
    job = write_job(tmp_path)
    env = dict(ma_env, HUAWEICLOUD_SDK_SK="sk-WRONG-000000000000")
    result = ma_submit([str(job)], env)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("ma-submit: error: ModelArts refused the credentials from the environment")
    assert "Traceback" not in result.stderr and "sk-WRONG" not in result.stderr
    assert fake_ma.jobs == {}


def test_a_create_the_policy_denies_is_one_line_naming_the_action(
    tmp_path: Path, fake_ma: FakeModelArts, s3: Any, ma_env: Dict[str, str]
) -> None:
    job = write_job(tmp_path)
    fake_ma.denied = {"modelarts:trainJob:create"}
    result = ma_submit([str(job)], ma_env)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("ma-submit: error:") == 1, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("ma-submit: error: ModelArts denied the action modelarts:trainJob:create (POST "), line
    assert "the credentials from the environment (HUAWEICLOUD_SDK_AK, HUAWEICLOUD_SDK_SK)" in line
    assert "allow modelarts:trainJob:create in the IAM policy of that user" in line and "agency" in line
    assert fake_ma.jobs == {} and fake_ma.signature_failures == [] and SK not in result.stderr


def test_a_flaky_service_during_a_wait_is_one_note_and_one_when_it_answers_again(
    tmp_path: Path, fake_ma: FakeModelArts, s3: Any, ma_env: Dict[str, str]
) -> None:
    """Every poll of the job met one 500 (then its retry was answered): the wait said one note a poll. Now: every
    retry of the poll that met the outage first, nothing of the next polls' retries, and one note once a poll is
    answered at its first attempt again, counting the retries it did not note."""
    job = write_job(tmp_path)
    fake_ma.outcome = ("silent", 0)  # runs until the test ends it
    job_id = ma_submit(["--detach", str(job)], ma_env).stdout.strip()
    (platform_id,) = fake_ma.jobs
    fake_ma.faults = {"get": ["500", "ok"] * 3}
    waiter = subprocess.Popen([os.path.join(VENV_BIN, "ma-submit"), "wait", job_id], env=ma_env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(lambda: fake_ma.faults["get"] == [], what="three polls, each retried once")
        clean = fake_ma.count("GET", platform_id)
        wait_for(lambda: fake_ma.count("GET", platform_id) > clean, what="a poll answered at its first attempt")
        fake_ma.finish(platform_id, 0)
        _out, err = waiter.communicate(timeout=120)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.communicate(timeout=30)
    assert waiter.returncode == 0, err
    notes = [line for line in err.splitlines() if line.startswith("ma-submit: note: ")]
    assert len(notes) == 2, err
    assert "HTTP 500 ModelArts.0001: internal error; attempt 2 of 6 in " in notes[0], notes
    assert re.search(r"/training-jobs/[0-9a-f-]+: answered at the first attempt again, [0-9.]+s after the first "
                     r"retry; 2 more retries not noted$", notes[1]), notes  # fmt: skip
    assert fake_ma.signature_failures == []


def test_missing_flavor_and_obs_dir_are_config_errors(tmp_path: Path, ma_env: Dict[str, str]) -> None:
    job = write_job(tmp_path, resources={"hosts": 2})
    result = ma_submit(["--dry-run", str(job)], ma_env)
    assert result.returncode == 2
    assert "resources.flavor: is required for the modelarts backend" in result.stderr
    job = write_job(tmp_path / "b", modelarts=None)
    result = ma_submit(["--dry-run", str(job)], ma_env)
    assert result.returncode == 2 and "modelarts.obs_dir: is required" in result.stderr


def test_an_excluded_boot_file_is_refused_before_any_call(
    tmp_path: Path, fake_ma: FakeModelArts, s3: Any, ma_env: Dict[str, str]
) -> None:
    job = write_job(tmp_path)
    (tmp_path / "code" / ".malaunchignore").write_text("*.log\ntrain.py\n")
    result = ma_submit([str(job)], ma_env)
    assert result.returncode == 2, result.stderr
    assert "boot_file: is excluded from the upload" in result.stderr
    assert fake_ma.calls == [] and objects(s3) == {}
