"""Sweeps on the cloud backends: the real ``ma-submit sweep`` against moto's S3 server and the fake ModelArts
API (one upload for the whole sweep, one create per trial, no duplicate through a dropped connection), and the
Volcano backend against the Kubernetes fake (one Volcano Job per trial, labelled with the sweep id)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml
from fake_modelarts import FakeModelArts
from kubefake import FakeKube
from malaunch.sdk import spec_from_mapping
from malaunch.sdk.backends.volcano.backend import VolcanoBackend
from malaunch.sdk.sweep import Sweep
from malaunch.sdk.sweep.run import SWEEP_ID_LABEL, TRIAL_LABEL
from modelarts_env import BUCKET
from sdkutil import ma_submit
from volcano_checks import crd_errors

pytestmark = pytest.mark.process


def test_modelarts_sweep_uploads_once_and_creates_each_trial_once(
    tmp_path: Path, fake_ma: FakeModelArts, s3: Any, ma_env: Dict[str, str]
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('training')\n")
    (code / "util.py").write_text("X = 1\n")
    data = {
        "name": "ma-sweep",
        "backend": "modelarts",
        "run_method": "torchrun",
        "code_dir": "code",
        "boot_file": "train.py",
        "args": ["--lr={lr}"],
        "image": "swr.cn-north-4.myhuaweicloud.com/team/malaunch-torch:1.0",
        "resources": {"hosts": 1, "flavor": "modelarts.vm.cpu.8u"},
        "modelarts": {"obs_dir": f"obs://{BUCKET}/jobs/"},
        "sweep": {"params": {"lr": [0.1, 0.01, 0.001]}, "max_parallel": 1},
    }
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(data))
    fake_ma.faults = {"create": ["drop", "500"]}
    result = ma_submit(["sweep", "--output", "json", str(job)], ma_env)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert {t["state"] for t in answer["trials"]} == {"SUCCEEDED"} and len(answer["trials"]) == 3
    # N creates and no duplicate: the dropped answer was found again by its client token
    assert len(fake_ma.jobs) == 3
    names = sorted(job.body["metadata"]["name"] for job in fake_ma.jobs.values())
    assert sorted(t["job_id"] for t in answer["trials"]) == names  # one id: the name each plan showed
    commands = sorted(job.body["algorithm"]["command"] for job in fake_ma.jobs.values())
    assert [c.split()[-1] for c in commands] == ["--lr=0.001", "--lr=0.01", "--lr=0.1"]
    assert {job.body["algorithm"]["code_dir"] for job in fake_ma.jobs.values()} == {
        f"obs://{BUCKET}/jobs/ma-sweep/code/"
    }
    indexes = sorted(job.body["algorithm"]["environments"]["MALAUNCH_TRIAL_INDEX"] for job in fake_ma.jobs.values())
    assert indexes == ["0", "1", "2"]
    # one upload for the whole sweep: the submitter uploaded (trial 0); the trials started later uploaded nothing
    assert result.stderr.count("file(s) uploaded") == 1, result.stderr
    sweep_dir = Path(ma_env["MALAUNCH_HOME"]) / "sweeps" / answer["id"]
    driver_log = sweep_dir / "driver.log"
    assert "uploaded" not in (driver_log.read_text() if driver_log.exists() else "")
    keys = {item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])}
    # the code once, and the one upload manifest beside it
    assert keys == {
        "jobs/ma-sweep/code/train.py",
        "jobs/ma-sweep/code/util.py",
        "jobs/ma-sweep/code.malaunch-manifest.json",
    }
    assert fake_ma.signature_failures == [] and fake_ma.body_errors == []
    status = ma_submit(["sweep", "status", answer["id"]], ma_env)
    assert status.returncode == 0 and "3 SUCCEEDED" in status.stdout


def test_volcano_sweep_makes_one_labelled_job_per_trial(kube: FakeKube, tmp_path: Path, home: Path) -> None:
    config = kube.kubeconfig(tmp_path / "kubeconfig")
    (tmp_path / "train.py").write_text("print('hi')\n")
    backend = VolcanoBackend(kubeconfig=str(config), environ={"MALAUNCH_HOME": str(home)}, poll_interval=0.2)
    spec = spec_from_mapping(
        {
            "name": "vc-sweep",
            "run_method": "torchrun",
            "code_dir": str(tmp_path),
            "boot_file": "train.py",
            "image": "reg.example/malaunch:0.1.0",
            "backend": "volcano",
            "resources": {"hosts": 2, "devices_per_host": 1},
            "env": {"MALAUNCH_TEST_SCENARIO": "{scenario}"},
            "volcano": {"not_retryable_exit_codes": [2, 7]},
        }
    )
    sweep = Sweep(spec, params={"scenario": ["succeed", "fail7", "succeed"]}, max_parallel=2)
    handle = sweep.submit(backend, home=str(home), driver=False)  # this process drives it (wait)
    assert len(kube.cluster.created) == 2  # max_parallel: the third waits for a free slot
    rows = handle.wait(timeout=120)
    assert len(kube.cluster.created) == 3
    for manifest in kube.cluster.created:
        assert crd_errors(manifest) == []
        labels = manifest["metadata"]["labels"]
        assert labels[SWEEP_ID_LABEL] == handle.id
        assert labels["app.kubernetes.io/managed-by"] == "malaunch"
    trial_labels = sorted(m["metadata"]["labels"][TRIAL_LABEL] for m in kube.cluster.created)
    assert trial_labels == ["0", "1", "2"]
    by_index = {row.index: row for row in rows}
    assert [by_index[i].state for i in range(3)] == ["SUCCEEDED", "FAILED", "SUCCEEDED"]
    assert by_index[1].exit_code == 7 and handle.exit_code() == 7
    assert all(row.job_id is not None and row.job_id.startswith("ml/") for row in rows)


def test_stopping_an_ended_volcano_sweep_changes_nothing(kube: FakeKube, tmp_path: Path, home: Path) -> None:
    config = kube.kubeconfig(tmp_path / "kubeconfig")
    (tmp_path / "train.py").write_text("print('hi')\n")
    backend = VolcanoBackend(kubeconfig=str(config), environ={"MALAUNCH_HOME": str(home)}, poll_interval=0.2)
    spec = spec_from_mapping(
        {
            "name": "vc-ended", "run_method": "torchrun", "code_dir": str(tmp_path), "boot_file": "train.py",
            "image": "reg.example/malaunch:0.1.0", "backend": "volcano",
            "resources": {"hosts": 2, "devices_per_host": 1}, "env": {"MALAUNCH_TEST_SCENARIO": "{scenario}"},
        }
    )  # fmt: skip
    handle = Sweep(spec, params={"scenario": ["succeed", "succeed"]}).submit(backend, home=str(home), driver=False)
    assert [row.state for row in handle.wait(timeout=120)] == ["SUCCEEDED", "SUCCEEDED"]
    before = handle.record()
    handle.stop()
    assert handle.record() == before and before["stopped"] is None  # not "stopped by the user"
    assert kube.cluster.commands == []  # nothing was asked of the cluster's jobs
