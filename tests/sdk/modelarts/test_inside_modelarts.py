"""Inside a ModelArts job against the fake ModelArts API and moto's S3 on 127.0.0.1: the pending reason from the
secondary phase and the events, events read page by page, the metrics API as ``top``, and ``exec`` as the
ready-to-run ssh command of a job created with ``modelarts.ssh.key_pair_names`` (one line on how to enable it
otherwise). Every request is signed and checked against ``huaweicloudsdkmodelarts``' models by the fake."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml
from fake_modelarts import FakeModelArts
from malaunch.sdk import Job, JobState
from malaunch.sdk.backends.modelarts.backend import ModelArtsBackend
from malaunch.sdk.errors import ConfigError, ExecElsewhere, JobNotRunning
from modelarts_env import BUCKET
from sdkutil import ma_submit, wait_for

pytestmark = pytest.mark.process


def job_file(folder: Path, **extra: Any) -> Path:
    code = folder / "code"
    code.mkdir(parents=True)
    (code / "train.py").write_text("print('training')\n")
    data: Dict[str, Any] = {
        "name": "inside", "backend": "modelarts", "run_method": "torchrun", "code_dir": "code",
        "boot_file": "train.py", "image": "swr.example/team/malaunch:1.0",
        "resources": {"hosts": 2, "flavor": "modelarts.vm.cpu.8u"},
        "modelarts": {"obs_dir": f"obs://{BUCKET}/jobs/", **extra},
    }  # fmt: skip
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def backend(ma_env: Dict[str, str]) -> ModelArtsBackend:
    return ModelArtsBackend(environ=ma_env, status_interval=0.0, poll=0.1, progress=None)


def test_a_queuing_job_says_why_and_refuses_top_and_exec(fake_ma: FakeModelArts, s3: Any, tmp_path: Path,
                                                          ma_env: Dict[str, str]) -> None:  # fmt: skip
    fake_ma.outcome = ("queue", 0)
    impl = backend(ma_env)
    handle = Job.from_yaml(str(job_file(tmp_path))).submit(impl)
    wait_for(lambda: "Queuing" in handle.status().pending_reason, 60, "the job to queue")
    status = handle.status()
    assert status.state is JobState.PENDING
    assert status.pending_reason == (
        "the platform reports Pending/Queuing; warning event: Insufficient resources: 0 of 2 nodes of flavor "
        "modelarts.vm.cpu.8u are free in the pool; the job waits in the queue"
    )
    text = ma_submit(["status", handle.id], ma_env)
    assert f"waiting:   {status.pending_reason}" in text.stdout.splitlines(), text.stderr
    for verb in ("top", "exec"):
        refused = ma_submit([verb, handle.id], ma_env)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert f"job {handle.id} is PENDING (Pending/Queuing), nothing of it runs" in refused.stderr
    assert fake_ma.body_errors == [] and fake_ma.signature_failures == []


def test_events_are_read_page_by_page(fake_ma: FakeModelArts, s3: Any, tmp_path: Path, ma_env: Dict[str, str]) -> None:
    fake_ma.outcome = ("fail", 7)
    impl = backend(ma_env)
    handle = Job.from_yaml(str(job_file(tmp_path))).submit(impl)
    assert handle.wait(timeout=60, poll_interval=0.1).state is JobState.FAILED
    impl.events_page = 2
    before = fake_ma.count("GET", "/events")
    events = list(handle.events())
    assert fake_ma.count("GET", "/events") - before == 3  # 6 events, 2 a page
    assert [(e.source, e.reason, e.level) for e in events] == [
        ("job", "Info", "Info"), ("job", "Queuing", "Info"), ("worker-0", "Started", "Info"),
        ("worker-1", "Started", "Info"), ("worker-1", "Exited", "Error"), ("job", "Info", "Info"),
    ]  # fmt: skip
    assert events[4].host == 1 and events[4].message == "Exited: task worker-1 exited with code 7"
    printed = ma_submit(["events", "--output", "json", handle.id], ma_env)
    assert [e["message"] for e in json.loads(printed.stdout)] == [e.message for e in events], printed.stderr
    with pytest.raises(JobNotRunning, match="FAILED"):
        handle.usage()
    assert fake_ma.body_errors == [] and fake_ma.signature_failures == []
    refused = ma_submit(["events", handle.id], {**ma_env, "HUAWEICLOUD_SDK_SK": "not-the-key"})
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith("ma-submit: error: ModelArts refused the credentials") and "not-the-key" not in \
        refused.stderr  # fmt: skip


def test_top_and_the_ssh_endpoint_of_a_running_job(fake_ma: FakeModelArts, s3: Any, tmp_path: Path,
                                                    ma_env: Dict[str, str]) -> None:  # fmt: skip
    fake_ma.outcome = ("hang", 0)
    impl = backend(ma_env)
    job = Job.from_yaml(str(job_file(tmp_path / "a", ssh={"key_pair_names": ["KeyPair-team"]})))
    assert job.plan(backend=impl).request.body["endpoints"] == {"ssh": {"key_pair_names": ["KeyPair-team"]}}
    handle = job.submit(impl)
    wait_for(lambda: handle.status().state is JobState.RUNNING, 60, "running")
    report = handle.usage()
    assert [(h.host, h.name, h.cpu_percent, h.memory_percent, dict(h.accelerators)) for h in report.hosts] == [
        (0, "worker-0", 20.0, 35.5, {"gpuUtil": 90.0, "gpuMemUsage": 60.0}),
        (1, "worker-1", 21.0, 36.5, {"gpuUtil": 89.0, "gpuMemUsage": 60.0}),
    ]
    table = ma_submit(["top", handle.id], ma_env).stdout.splitlines()
    assert table[1].split() == ["0", "worker-0", "20.0%", "35.5%", "-", "gpuMemUsage", "60%,", "gpuUtil", "90%"]
    with pytest.raises(ExecElsewhere) as raised:
        handle.exec(["nvidia-smi"], host=1)
    assert raised.value.command == ("ssh", "-p", "30023", "-t", "ma-user@192.0.2.11", "nvidia-smi")
    printed = ma_submit(["exec", handle.id, "--host", "1"], ma_env)
    assert (printed.returncode, printed.stdout) == (0, "ssh -p 30023 ma-user@192.0.2.11\n"), printed.stderr
    assert "ModelArts has no exec API; host 1 (task worker-1) takes SSH with key pair KeyPair-team" in printed.stderr
    plain = Job.from_yaml(str(job_file(tmp_path / "b"))).submit(impl)
    wait_for(lambda: plain.status().state is JobState.RUNNING, 60, "running")
    with pytest.raises(ConfigError, match="under 'modelarts:' in the job file and submit it again"):
        plain.exec(["true"])
    refused = ma_submit(["exec", plain.id, "--", "true"], ma_env)
    assert refused.returncode == 2 and refused.stderr == (
        f"ma-submit: error: job {plain.id} has no SSH endpoint (ModelArts has no exec API), got '{plain.id}'; add "
        "'ssh: {key_pair_names: [YOUR_KEY_PAIR]}' under 'modelarts:' in the job file and submit it again\n"
    )
    for ident in (handle.id, plain.id):
        impl.stop(ident)
    assert fake_ma.body_errors == [] and fake_ma.signature_failures == []
