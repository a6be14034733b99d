"""The job's secret (issue 25): made at submit, one per job, handed to every host as ``MALAUNCH_JOB_SECRET``, and
found nowhere else: not in the job's files, reports, logs, plans, dry runs or anything ``ma-submit`` prints.

Local: real hosts; the secret is read from the hosts' shims' own environment (``/proc/<pid>/environ``). Volcano:
the Kubernetes fake (the Secret checked with the client's models, owned by the job, gone with it). ModelArts:
the fake platform (the create body checked with the platform's models)."""

from __future__ import annotations

import base64
import json
import re
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml
from fake_modelarts import FakeModelArts
from kubefake import FakeKube, volcano_job
from malaunch.sdk import BackendError, spec_from_mapping
from malaunch.sdk.backends._http import RetryPolicy
from malaunch.sdk.backends.volcano.backend import VolcanoBackend
from modelarts_env import BUCKET
from sdkutil import RecordedRuns, ma_submit, wait_for, write_job

HEX64 = re.compile(r"[0-9a-f]{64}\Z")
VARIABLE = "MALAUNCH_JOB_SECRET"
WAIT = 120.0

WAIT_FOR_GO = """\
import os, sys, time
go = sys.argv[1]
deadline = time.monotonic() + 90
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.05)
print("rank", os.environ.get("RANK"), "done", flush=True)
"""


def files_holding(root: Path, secret: str) -> List[str]:
    """Every file under ``root`` whose bytes contain ``secret``."""
    needle = secret.encode()
    return [str(p) for p in root.rglob("*") if p.is_file() and not p.is_symlink() and needle in p.read_bytes()]


def environ_of(pid: int) -> Dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {key.decode(): value.decode(errors="replace") for key, value in pairs}


def host_pids(home: Path, job_id: str) -> List[int]:
    state = json.loads((home / "jobs" / job_id / "state.json").read_text())
    return [host["pid"] for host in state["hosts"] if isinstance(host.get("pid"), int)]


def started_hosts(home: Path, job_id: str) -> List[int]:
    wait_for(lambda: len(host_pids(home, job_id)) == 2, WAIT, "both hosts to start")
    return host_pids(home, job_id)


def secret_of(pid: int) -> str:
    wait_for(lambda: VARIABLE in environ_of(pid), 10.0, "the shim's environment to be readable")
    return environ_of(pid)[VARIABLE]


@pytest.mark.process
def test_local_hosts_share_a_fresh_secret_found_nowhere_else(
    tmp_path: Path, home: Path, cli_env: Dict[str, str], cleanup_jobs: None
) -> None:
    run = RecordedRuns(cli_env)
    outputs = run.outputs

    go = tmp_path / "go"
    job = write_job(tmp_path / "code", WAIT_FOR_GO, name="secret", args=[str(go)], run_method="ranktable",
                    resources={"hosts": 2, "devices_per_host": 1})  # fmt: skip
    dry = run([str(job), "--dry-run"])
    assert dry.returncode == 0, dry.stderr
    assert f"{VARIABLE}=***" in dry.stdout  # shown, masked
    dry_json = run([str(job), "--dry-run", "--output", "json"])
    assert dry_json.returncode == 0, dry_json.stderr
    secrets: List[str] = []
    for _ in range(2):
        started = run([str(job), "--detach"])
        assert started.returncode == 0, started.stderr
        job_id = started.stdout.strip().splitlines()[-1]
        seen = set()
        for pid in started_hosts(home, job_id):
            seen.add(secret_of(pid))
        (secret,) = seen  # the same on every host
        assert HEX64.match(secret), "a 32-byte secret in hex"
        plan = json.loads((home / "jobs" / job_id / "plan.json").read_text())
        assert {host["env"][VARIABLE] for host in plan["request"]["hosts"]} == {"<secret>"}
        status = run(["status", job_id])  # while it runs
        assert status.returncode == 0, status.stderr
        go.write_text("go\n")
        assert run(["wait", job_id]).returncode == 0
        go.unlink()
        for args in (["status", "--output", "json", job_id], ["logs", job_id], ["events", job_id],
                     ["list", "--output", "json"]):  # fmt: skip
            result = run(args)
            assert result.returncode == 0, (args, result.stderr)
        assert "rank 1 done" in run(["logs", job_id]).stdout
        secrets.append(secret)
    assert secrets[0] != secrets[1], "every job gets its own secret"
    for secret in secrets:
        assert files_holding(home, secret) == []
        assert files_holding(tmp_path / "code", secret) == []
        assert not [text for text in outputs if secret in text]


# ---- Volcano ----------------------------------------------------------------------------------------------------


def secret_job() -> Dict[str, Any]:
    return volcano_job("succeed", name="vc-secret")


def test_volcano_secret_is_a_kubernetes_secret_owned_by_the_job(kube: FakeKube, kubeconfig: Path) -> None:
    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2)
    spec = spec_from_mapping(secret_job())
    plan = backend.plan(spec, job_id=backend.new_job_id(spec, now=time.time()), now=time.time())
    handle = backend.submit(spec)
    namespace, name = handle.id.split("/")
    (created,) = kube.cluster.created
    env = created["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["env"]
    (entry,) = [item for item in env if item["name"] == VARIABLE]
    assert entry == {"name": VARIABLE, "valueFrom": {"secretKeyRef": {"name": f"{name}-secret", "key": VARIABLE}}}
    (secret_object,) = kube.cluster.secrets.values()
    job_uid = kube.cluster.jobs[(namespace, name)].uid
    assert secret_object["metadata"]["name"] == f"{name}-secret"
    assert [(o["kind"], o["name"], o["uid"]) for o in secret_object["metadata"]["ownerReferences"]] == [
        ("Job", name, job_uid)
    ]
    secret = base64.b64decode(secret_object["data"][VARIABLE]).decode()
    assert HEX64.match(secret)
    final = handle.wait(timeout=WAIT, poll_interval=0.1)
    printed = [plan.render(), plan.render_json(), json.dumps(created), json.dumps(final.to_json()),
               "\n".join(handle.logs())]  # fmt: skip
    assert not [text for text in printed if secret in text]
    assert backend.delete(handle.id) == handle.id
    assert kube.cluster.secrets == {}  # deleted with the job


def test_volcano_garbage_collector_takes_the_secret_with_the_job(kube: FakeKube, kubeconfig: Path) -> None:
    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2)
    handle = backend.submit(spec_from_mapping(secret_job()))
    namespace, name = handle.id.split("/")
    assert len(kube.cluster.secrets) == 1
    backend.api.delete_job(namespace, name)  # as kubectl delete would: the owner goes, the collector follows
    assert kube.cluster.secrets == {}


def test_volcano_job_without_its_secret_is_deleted_again(kube: FakeKube, kubeconfig: Path) -> None:
    policy = RetryPolicy(attempts=2, initial=0.01, maximum=0.01, jitter=0.0)
    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2, policy=policy)
    kube.cluster.faults["POST secret"] = ["503", "503"]
    with pytest.raises(BackendError) as caught:
        backend.submit(spec_from_mapping(secret_job()))
    assert "Secret" in str(caught.value) and not re.search(r"[0-9a-f]{64}", str(caught.value))
    assert len(kube.cluster.created) == 1 and kube.cluster.jobs == {}  # created, then deleted: no pod waits for it
    assert kube.cluster.secrets == {}


# ---- ModelArts --------------------------------------------------------------------------------------------------


def modelarts_job(folder: Path, **modelarts: Any) -> Path:
    code = folder / "code"
    code.mkdir(parents=True, exist_ok=True)
    (code / "train.py").write_text("print('training')\n")
    data: Dict[str, Any] = {
        "name": "ma-secret",
        "backend": "modelarts",
        "run_method": "torchrun",
        "code_dir": "code",
        "boot_file": "train.py",
        "image": "swr.cn-north-4.myhuaweicloud.com/team/malaunch-torch:1.0",
        "resources": {"hosts": 2, "flavor": "modelarts.vm.cpu.8u"},
        "modelarts": {"obs_dir": f"obs://{BUCKET}/jobs/", **modelarts},
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.process
def test_modelarts_secret_only_in_the_body_sent_and_fault_tolerance_annotations(
    tmp_path: Path, fake_ma: FakeModelArts, s3: Any, ma_env: Dict[str, str]
) -> None:
    run = RecordedRuns(ma_env)
    outputs = run.outputs

    job = modelarts_job(tmp_path, job_retry_num=5, job_unconditional_retry=True)
    dry = run([str(job), "--dry-run", "--output", "json"])
    assert dry.returncode == 0, dry.stderr
    body = json.loads(dry.stdout)["request"]["body"]
    assert body["metadata"]["annotations"] == {
        "fault-tolerance/job-retry-num": "5",
        "fault-tolerance/job-unconditional-retry": "true",
    }
    assert body["algorithm"]["environments"][VARIABLE] == "***"
    dry_text = run([str(job), "--dry-run"])
    assert dry_text.returncode == 0 and "fault-tolerance/job-retry-num" in dry_text.stdout
    first = run([str(job)])
    assert first.returncode == 0, first.stderr
    second = run([str(job)])
    assert second.returncode == 0, second.stderr
    assert fake_ma.body_errors == [] and fake_ma.signature_failures == []
    sent = [fake_ma.jobs[key].body for key in fake_ma.jobs]
    secrets = [item["algorithm"]["environments"][VARIABLE] for item in sent]
    assert all(HEX64.match(secret) for secret in secrets) and secrets[0] != secrets[1]
    assert [item["metadata"]["annotations"]["fault-tolerance/job-retry-num"] for item in sent] == ["5", "5"]
    for platform_id in fake_ma.jobs:
        name = fake_ma.jobs[platform_id].body["metadata"]["name"]
        for args in (["status", "--output", "json", name], ["logs", name], ["list", "--backend", "modelarts"]):
            assert run(args).returncode == 0, args
    for secret in secrets:
        assert not [text for text in outputs if secret in text]
        assert files_holding(tmp_path, secret) == []


def test_modelarts_unconditional_retry_needs_a_retry_number(tmp_path: Path, ma_env: Dict[str, str]) -> None:
    result = ma_submit([str(modelarts_job(tmp_path, job_unconditional_retry=True)), "--dry-run"], ma_env)
    assert result.returncode == 2
    assert "modelarts.job_unconditional_retry" in result.stderr and "job_retry_num" in result.stderr
    assert "Traceback" not in result.stderr
    bad = ma_submit([str(modelarts_job(tmp_path / "b", job_retry_num=129)), "--dry-run"], ma_env)
    assert bad.returncode == 2 and "modelarts.job_retry_num: must be <= 128" in bad.stderr
