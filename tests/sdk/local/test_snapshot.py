"""The local backend's code snapshot: ``.malaunchignore`` leaves files out, the dry run tells its size, and a big
snapshot gets a warning naming its biggest folders (real ``ma-submit``, real jobs)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict

import pytest
from malaunch.sdk.backends.local.jobdir import JobPaths
from malaunch.sdk.backends.local.submit import SNAPSHOT_WARN_BYTES
from sdkutil import job_ids, ma_submit, write_job

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("cleanup_jobs")]

LIST_FILES = """
    import os
    for folder, _dirs, names in sorted(os.walk(".")):
        for name in sorted(names):
            print("file", os.path.join(folder, name)[2:], flush=True)
"""


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as handle:
        handle.truncate(size)


def test_ignore_file_leaves_data_out_of_the_snapshot(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    job = write_job(tmp_path / "code", LIST_FILES, name="snap")
    code = job.parent
    (code / "data").mkdir()
    (code / "data" / "shard-0.bin").write_bytes(b"x" * 1000)
    (code / "notes.log").write_text("log\n")
    (code / "lib").mkdir()
    (code / "lib" / "util.py").write_text("X = 1\n")
    (code / ".malaunchignore").write_text("data/\n*.log\n")

    dry = ma_submit(["--dry-run", "--output", "json", str(job)], cli_env)
    assert dry.returncode == 0, dry.stderr
    notes = json.loads(dry.stdout)["notes"]
    assert any(note.startswith("code snapshot: 4 file(s)") for note in notes), notes

    result = ma_submit([str(job)], cli_env)
    assert result.returncode == 0, result.stdout + result.stderr
    listed = {line.split("file ", 1)[1] for line in result.stdout.splitlines() if "] file " in line}
    assert {"boot.py", "job.yaml", "lib/util.py", ".malaunchignore"} <= listed
    assert not any(name.startswith("data") or name.endswith(".log") for name in listed), listed
    (job_id,) = job_ids(home)
    snapshot = Path(JobPaths(str(home), job_id).job_dir) / "code" / "code"
    assert not (snapshot / "data").exists() and (snapshot / "lib" / "util.py").read_text() == "X = 1\n"


def test_big_snapshot_is_named_in_a_warning(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    job = write_job(tmp_path / "code", "print('ok')\n", name="big")
    (job.parent / "dataset").mkdir()
    _sparse(job.parent / "dataset" / "train.bin", SNAPSHOT_WARN_BYTES + 1)  # sparse: no real disk use
    dry = ma_submit(["--dry-run", str(job)], cli_env)
    assert dry.returncode == 0, dry.stderr
    assert "warning: every submit copies" in dry.stdout and "dataset (100.0 MB)" in dry.stdout
    assert os.path.join(str(job.parent), ".malaunchignore") in dry.stdout
    assert job_ids(home) == []  # a dry run creates nothing
