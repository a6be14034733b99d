"""The job index (``$MALAUNCH_HOME/job-index.json``) under concurrent writers: every submit keeps its entry.

``JobIndex.record`` reads, changes and writes under an ``fcntl`` lock; without it, submits running at once
overwrite each other's entries. Proven with real processes: ten parallel ``JobIndex.record`` callers, and ten
parallel ``ma-submit --backend volcano --detach`` against the loopback Kubernetes API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
import yaml
from kubefake import FakeKube
from malaunch.sdk.backends.job_index import JobIndex
from sdkutil import CLI_TIMEOUT, REPO, VENV_BIN

pytestmark = pytest.mark.process

WRITER = """
import sys, time
from malaunch.sdk.backends.job_index import JobIndex
index = JobIndex(sys.argv[1])
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline()  # every writer starts at the same moment
for n in range(int(sys.argv[3])):
    index.record(f"{sys.argv[2]}-{n}", "volcano", created_at=time.time())
"""


def test_parallel_writers_lose_no_entry(tmp_path: Path) -> None:
    path = str(tmp_path / "index" / "job-index.json")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, path, f"w{i}", "20"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(10)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    entries = JobIndex(path).entries()
    assert len(entries) == 200
    assert {f"w{i}-{n}" for i in range(10) for n in range(20)} == set(entries)
    assert not [name for name in os.listdir(tmp_path / "index") if name.startswith(".job-index.")]  # no temp left


def test_ten_parallel_detached_submits_leave_ten_entries(
    kube: FakeKube, cli_env: Dict[str, str], home: Path, tmp_path: Path
) -> None:
    env = {**cli_env, "KUBECONFIG": str(kube.kubeconfig(tmp_path / "kubeconfig"))}
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "train.py").write_text("print('hi')\n")
    job = folder / "job.yaml"
    job.write_text(yaml.safe_dump({
        "name": "many", "run_method": "torchrun", "code_dir": ".", "boot_file": "train.py",
        "image": "reg.example/malaunch:0.1.0", "resources": {"hosts": 1},
        "env": {"MALAUNCH_TEST_SCENARIO": "run"},
    }))  # fmt: skip
    command = [os.path.join(VENV_BIN, "ma-submit"), "--backend", "volcano", "--detach", str(job)]
    procs = [
        subprocess.Popen(command, env=env, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(10)
    ]
    ids = set()
    for proc in procs:
        out, err = proc.communicate(timeout=CLI_TIMEOUT)
        assert proc.returncode == 0, err
        ids.add(out.strip())
    assert len(ids) == 10 and len(kube.cluster.jobs) == 10
    data = json.loads((home / "job-index.json").read_text())
    assert set(data["jobs"]) == ids
    assert {entry["backend"] for entry in data["jobs"].values()} == {"volcano"}
