"""Smoke test of the verbs case: ``bench/run.py --only verbs --reps 1 --no-write`` submits its one local job, runs
the floor and every verb, prints a row for each and a target per verb. No timing is asserted (that is the bench's
job); the test proves the case works end to end, leaves docs/performance.md alone and nothing running."""

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
def test_the_verbs_case_prints_every_verb_and_its_target(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    env = dict(os.environ, **{MARK_VAR: mark})
    docs = REPO / "docs" / "performance.md"
    before = docs.read_bytes()
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "run.py"), "--only", "verbs", "--reps", "1", "--no-write"],
        cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("verbs ")]
    for subject in ("python -c pass", "ma-submit --help", "ma-submit submit --help", "ma-submit list",
                    "ma-submit status JOB", "ma-submit logs JOB", "ma-submit events JOB",
                    "ma-submit stop JOB"):  # fmt: skip
        assert any(f" {subject} " in row and " ms" in row for row in rows), (subject, done.stdout)
    targets = [line for line in done.stdout.splitlines() if "within 60.0 ms of python -c pass" in line]
    assert len(targets) == 7, done.stdout
    output = done.stdout + done.stderr
    for subject in ("python -c pass", "ma-submit --help", "ma-submit status JOB"):  # where the start-up goes
        line = next((text for text in output.splitlines() if f"imports of `{subject}`: interpreter " in text), "")
        assert " total " in line, (subject, output)
    # every verb goes through click (the bench counts click's own group)
    assert "click " in next(text for text in output.splitlines() if "imports of `ma-submit --help`" in text)
    assert docs.read_bytes() == before, "--no-write must leave docs/performance.md alone"
    assert_nothing_left(mark, variable=MARK_VAR)
