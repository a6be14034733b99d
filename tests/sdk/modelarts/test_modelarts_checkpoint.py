"""The checkpoint folder on ModelArts (issue 39 item 1): an output channel the platform uploads to OBS, under
``modelarts.obs_dir`` unless ``checkpoint.obs_path`` says where. The create body carries it and passes the official
``huaweicloudsdkmodelarts`` models (the fake API checks every create with them); what a platform retry does not
bring back is said in one line by ``--dry-run`` and by submit; ``--resume-from`` brings an ended job's uploaded
checkpoints in as an input channel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml
from fake_modelarts import FakeModelArts
from ma_models import model_errors
from malaunch.sdk import ConfigError, JobState, SpecError, spec_from_mapping
from malaunch.sdk.backends.modelarts.backend import ModelArtsBackend
from malaunch.sdk.backends.modelarts.checkpoint import (
    CHANNEL,
    LOCAL_DIR,
    RESUME_CHANNEL,
    RESUME_DIR,
    UNRESOLVED,
    add_input,
    checkpoint_url_of,
    resume_channel,
    resume_channel_at,
)
from malaunch.sdk.backends.modelarts.request import build_create_body
from malaunch.sdk.spec.resume import ResumeRef, parse_resume
from modelarts_env import BUCKET
from sdkutil import ma_submit

JOB_ID = "ck-20261128-120000-abcdef"
WAIT = 120.0


def job_data(hosts: int = 1, **checkpoint: Any) -> Dict[str, Any]:
    return {
        "name": "ck", "backend": "modelarts", "run_method": "torchrun", "code_dir": f"obs://{BUCKET}/code/",
        "boot_file": "train.py", "image": "swr.example/team/malaunch:1",
        "resources": {"hosts": hosts, "flavor": "modelarts.vm.cpu.8u"},
        "modelarts": {"obs_dir": f"obs://{BUCKET}/jobs/", "job_retry_num": 3}, "checkpoint": {"keep": 3, **checkpoint},
    }  # fmt: skip


def test_the_body_carries_the_output_channel_and_passes_the_models() -> None:
    body = build_create_body(spec_from_mapping(job_data()), JOB_ID)
    assert model_errors(body, "Job") == []
    (channel,) = body["algorithm"]["outputs"]
    assert channel == {"name": CHANNEL, "local_dir": LOCAL_DIR, "access_method": "env",
                       "remote": {"obs": {"obs_url": f"obs://{BUCKET}/jobs/{JOB_ID}/checkpoints/"}}}  # fmt: skip
    env = body["algorithm"]["environments"]
    assert (env["MALAUNCH_CHECKPOINT_DIR"], env["MALAUNCH_CHECKPOINT_KEEP"]) == (LOCAL_DIR, "3")
    assert checkpoint_url_of(body) == f"obs://{BUCKET}/jobs/{JOB_ID}/checkpoints/"
    chosen = build_create_body(spec_from_mapping(job_data(obs_path=f"obs://{BUCKET}/ckpt/run-1")), JOB_ID)
    assert checkpoint_url_of(chosen) == f"obs://{BUCKET}/ckpt/run-1/"
    mine = {**job_data(), "outputs": [{"name": "train_url"}]}
    outputs = build_create_body(spec_from_mapping(mine), JOB_ID)["algorithm"]["outputs"]
    assert [item["name"] for item in outputs] == ["train_url", CHANNEL]
    plain = build_create_body(spec_from_mapping({**job_data(), "checkpoint": None}), JOB_ID)
    assert "outputs" not in plain["algorithm"] and "MALAUNCH_CHECKPOINT_DIR" not in plain["algorithm"]["environments"]


def test_what_the_body_cannot_take_is_one_spec_error() -> None:
    taken = {**job_data(), "outputs": [{"name": CHANNEL}]}
    with pytest.raises(SpecError, match=r"outputs\[0\]\.name: is the checkpoint folder's channel on ModelArts"):
        build_create_body(spec_from_mapping(taken), JOB_ID)
    nowhere = {**job_data(), "modelarts": None, "code_dir": f"obs://{BUCKET}/code/"}
    with pytest.raises(SpecError) as caught:
        build_create_body(spec_from_mapping(nowhere), JOB_ID)
    assert str(caught.value) == "modelarts.obs_dir: is required for the modelarts backend; add modelarts: {obs_dir: " \
        "obs://bucket/prefix/}"


NOTE = (f"warning: checkpoints are uploaded to obs://{BUCKET}/jobs/{{id}}/checkpoints/, but a platform job retry "
        "(modelarts.job_retry_num) starts with an empty folder: the ModelArts API cannot download it back "
        "(malaunch's own restarts keep it); resume in a new job with --resume-from")  # fmt: skip


@pytest.mark.process
def test_dry_run_and_submit_say_what_a_retry_finds(
    fake_ma: FakeModelArts, ma_env: Dict[str, str], tmp_path: Path
) -> None:
    fake_ma.run_seconds = 0.2
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(job_data(hosts=2)))
    dry = ma_submit(["--dry-run", "--output", "json", str(job)], ma_env)
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert model_errors(plan["request"]["body"], "Job") == []
    assert plan["notes"][0] == NOTE.format(id=plan["job_id"])
    assert plan["notes"][1] == ("each of the 2 hosts has its own checkpoint folder (all uploaded to the same OBS "
                                "folder): a save completes on every host through the job's coordinator once the "
                                "hosts hold every rank's part (docs/recovery.md#one-folder-per-node)")  # fmt: skip
    text = ma_submit(["--dry-run", str(job)], ma_env)
    assert text.stdout.splitlines().count(f"  {NOTE}".replace("{id}", text.stdout.split()[1])) == 1  # one prefix
    assert "note: warning" not in text.stdout
    submitted = ma_submit(["--detach", str(job)], ma_env)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    warned = [line for line in submitted.stderr.splitlines() if "checkpoints are uploaded" in line]
    assert warned == [f"ma-submit: {NOTE.format(id=job_id)}"]
    assert fake_ma.body_errors == [] and fake_ma.signature_failures == []
    (stored,) = [j.body for j in fake_ma.jobs.values()]
    assert checkpoint_url_of(stored) == f"obs://{BUCKET}/jobs/{job_id}/checkpoints/"


def test_a_new_job_resumes_from_the_old_jobs_obs_folder(fake_ma: FakeModelArts, ma_env: Dict[str, str]) -> None:
    fake_ma.run_seconds = 0.2
    backend = ModelArtsBackend(environ=ma_env, status_interval=0.0, poll=0.1, progress=None)
    old = backend.submit(spec_from_mapping(job_data()))
    assert old.wait(timeout=WAIT, poll_interval=0.1).state is JobState.SUCCEEDED
    url = f"obs://{BUCKET}/jobs/{old.id}/checkpoints/"
    new_spec = spec_from_mapping(job_data())
    ref = backend.resume_check(ResumeRef(old.id[:10], "step-00000004"), new_spec)  # a prefix: our whole id
    assert ref == ResumeRef(old.id, "step-00000004", url)
    assert parse_resume(ref.text()) == ref and ref.text() == f"{old.id}:step-00000004@{url}"
    channel, folder = resume_channel_at(url, "step-00000004")
    assert channel == {"name": RESUME_CHANNEL, "local_dir": RESUME_DIR, "access_method": "env",
                       "remote": {"obs": {"obs_url": url}}}  # fmt: skip
    assert folder == f"{RESUME_DIR}/step-00000004"
    body = build_create_body(new_spec.replace(resume_from=ref.text()), "ck-20261128-130000-abcdef")
    assert model_errors(body, "Job") == []
    assert body["algorithm"]["inputs"] == [channel]
    assert body["algorithm"]["environments"]["MALAUNCH_RESUME_SOURCE"] == folder
    newest = build_create_body(new_spec.replace(resume_from=f"{old.id}@{url}"), "ck-20261128-130000-abcdef")
    assert newest["algorithm"]["environments"]["MALAUNCH_RESUME_SOURCE"] == RESUME_DIR  # its newest complete one
    with pytest.raises(SpecError, match="uses the name malaunch_resume"):
        add_input(body, channel)
    with pytest.raises(SpecError, match="resume_from: names no OBS folder yet"):  # the pure plan calls no API
        backend.plan(new_spec.replace(resume_from=old.id), job_id="ck-20261128-130000-abcdef", now=0.0)
    plain = backend.submit(spec_from_mapping({**job_data(), "checkpoint": None}))
    plain.wait(timeout=WAIT, poll_interval=0.1)
    with pytest.raises(ConfigError, match=f"job {plain.id} uploaded no checkpoints"):
        backend.resume_check(ResumeRef(plain.id), new_spec)
    fake_ma.run_seconds = 60.0
    running = backend.submit(spec_from_mapping(job_data()))
    with pytest.raises(ConfigError) as caught:
        backend.resume_check(ResumeRef(running.id), new_spec)
    assert str(caught.value).startswith(f"--resume-from: job {running.id} is ")
    assert str(caught.value).endswith(f"; wait for it to end, or stop it first: 'ma-submit stop {running.id}'")
    backend.stop(running.id)
    with pytest.raises(ConfigError, match="uploaded no checkpoints"):
        resume_channel({"metadata": {"name": "x"}, "algorithm": {"outputs": [{"name": "train_url"}]}})


@pytest.mark.process
def test_resume_from_through_the_cli_adds_the_input_channel(
    fake_ma: FakeModelArts, ma_env: Dict[str, str], tmp_path: Path
) -> None:
    """``ma-submit --resume-from OLD[:NAME]`` on ModelArts: submit carries the old job's OBS folder as an input
    channel (the fake checks the body with the real SDK models) and MALAUNCH_RESUME_SOURCE at its folder; the dry
    run asks the API nothing and shows that folder unresolved (issue 44 item 2); a job that uploaded no checkpoints
    is one line, exit 2, nothing created."""
    fake_ma.run_seconds = 0.2
    backend = ModelArtsBackend(environ=ma_env, status_interval=0.0, poll=0.1, progress=None)
    old = backend.submit(spec_from_mapping(job_data()))
    assert old.wait(timeout=WAIT, poll_interval=0.1).state is JobState.SUCCEEDED
    url = f"obs://{BUCKET}/jobs/{old.id}/checkpoints/"
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(job_data()))
    calls = len(fake_ma.calls)
    dry = ma_submit(["--dry-run", "--output", "json", "--resume-from", f"{old.id}:step-00000004", str(job)], ma_env)
    assert dry.returncode == 0, dry.stderr
    assert len(fake_ma.calls) == calls  # a dry run asks the API nothing
    plan = json.loads(dry.stdout)
    algorithm = plan["request"]["body"]["algorithm"]
    assert model_errors(plan["request"]["body"], "Job") == []
    assert algorithm["inputs"] == [resume_channel_at(UNRESOLVED)[0]]
    assert algorithm["environments"]["MALAUNCH_RESUME_SOURCE"] == f"{RESUME_DIR}/step-00000004"
    assert plan["notes"][-2] == (f"attempt 0 resumes from {RESUME_DIR}/step-00000004: input channel {RESUME_CHANNEL} "
                                 f"downloads job {old.id}'s checkpoints ({UNRESOLVED}) before the start")  # fmt: skip
    assert plan["notes"][-1].startswith(f"resume_from is not resolved in a dry run (no API call): submit reads job "
                                        f"{old.id}'s details")  # fmt: skip
    with pytest.raises(SpecError, match=r"resume_from.*a dry run's, not resolved"):  # such a plan is never sent
        backend.execute(backend.plan(spec_from_mapping({**job_data(), "resume_from": plan["spec"]["resume_from"]}),
                                     job_id="never-sent", now=0.0))  # fmt: skip
    assert len(fake_ma.calls) == calls
    submitted = ma_submit(["--detach", "--resume-from", old.id, str(job)], ma_env)
    assert submitted.returncode == 0, submitted.stderr
    (body,) = [j.body for j in fake_ma.jobs.values() if j.body["metadata"]["name"] == submitted.stdout.strip()]
    assert body["algorithm"]["inputs"] == [resume_channel_at(url)[0]]
    assert body["algorithm"]["environments"]["MALAUNCH_RESUME_SOURCE"] == RESUME_DIR
    assert fake_ma.body_errors == [] and fake_ma.signature_failures == []
    plain = backend.submit(spec_from_mapping({**job_data(), "checkpoint": None}))
    plain.wait(timeout=WAIT, poll_interval=0.1)
    count = len(fake_ma.jobs)
    refused = ma_submit(["--detach", "--resume-from", plain.id, str(job)], ma_env)
    assert (refused.returncode, refused.stdout, refused.stderr) == (2, "", (
        f"ma-submit: error: --resume-from: job {plain.id} uploaded no checkpoints (it had no checkpoint: section); "
        "resume from a job that ran with a checkpoint: section\n"))  # fmt: skip
    assert len(fake_ma.jobs) == count
