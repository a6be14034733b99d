"""Smoke test of the benchmark harness: ``bench/run.py --only ranktable-scale --no-write --quick`` runs and prints
a table row. No timing is asserted; the test only proves the harness works end to end and leaves nothing running.
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
def test_ranktable_scale_case_prints_a_table_row(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    env = dict(os.environ, **{MARK_VAR: mark})
    before = (REPO / "docs" / "performance.md").read_bytes() if (REPO / "docs" / "performance.md").exists() else None
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "run.py"), "--only", "ranktable-scale", "--no-write", "--quick"],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("rank-table scale")]
    assert any("parse + select + plan, in-process" in row and "32768 ranks" in row for row in rows), done.stdout
    assert any(" ms" in row for row in rows), done.stdout
    assert "Targets:" in done.stdout
    after = (REPO / "docs" / "performance.md").read_bytes() if (REPO / "docs" / "performance.md").exists() else None
    assert before == after, "--no-write must leave docs/performance.md alone"
    assert_nothing_left(mark, variable=MARK_VAR)


def test_a_baseline_that_names_no_commit_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "run.py"), "--only", "startup", "--baseline", "no-such-ref-x1"],
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1] == (
        "bench/run.py: error: --baseline 'no-such-ref-x1' is not a commit of this repository; give a commit, tag "
        "or branch, e.g. HEAD~1"
    )
    assert "Traceback" not in done.stderr and done.stdout == ""
