"""Smoke test of the OBS upload case: ``bench/run.py --only obs-upload --no-write --quick`` runs against moto's
S3 server and prints the three subjects with their ratios to the plain upload. No timing is asserted; the test
proves the case works end to end and leaves no moto server behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from shimutil import assert_nothing_left

REPO = Path(__file__).resolve().parents[2]
MARK_VAR = "BENCH_SMOKE_TEST_MARK"


@pytest.mark.process
def test_obs_upload_case_prints_the_three_subjects_and_ratios(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "run.py"), "--only", "obs-upload", "--no-write", "--quick"],
        cwd=str(tmp_path),
        env=dict(os.environ, **{MARK_VAR: mark}),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("obs upload")]
    subjects = ("plain boto3, 10 threads", "malaunch, first upload", "malaunch, unchanged re-upload")
    for subject in subjects:
        assert any(subject in row and "2,000 files" in row for row in rows), done.stdout
    assert sum("x plain" in row for row in rows) == 2, done.stdout
    assert "first upload >= 0.9x plain throughput (2,000 files)" in done.stdout
    assert "unchanged re-upload <= 0.1x plain time (2,000 files)" in done.stdout
    assert_nothing_left(mark, variable=MARK_VAR)
