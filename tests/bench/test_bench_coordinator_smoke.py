"""Smoke test of the coordinator case: ``bench/run.py --only coordinator --hosts 8 --quick --no-write`` runs 8
emulated hosts against the real coordinator and prints its rows. No timing is asserted: the shape of the output
(every subject at N=8, with a figure in its unit, sane bounds that do not depend on speed) and that the case leaves
no process and no change to docs/performance.md behind.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from shimutil import assert_nothing_left

REPO = Path(__file__).resolve().parents[2]
MARK_VAR = "BENCH_SMOKE_TEST_MARK"
SUBJECTS = {
    "every host joined and started attempt 0": "s",
    "coordinator CPU share, heartbeats every 2 s (timeout 20 s)": "%",
    "coordinator CPU share, heartbeats every 0.4 s (timeout 2 s)": "%",
    "coordinator resident memory (VmRSS)": "MB",
    "a host SIGKILLed (socket closed) -> every other host told": "s",
    "a host SIGSTOPped (silent) -> every other host told (timeout 2 s)": "s",
}


def _figure(row: str) -> tuple[float, str]:
    """The median cell of a console row: (value, unit), milliseconds as seconds."""
    number, unit = re.split(r"\s{2,}", row.strip())[3].split()
    return (float(number) / 1000.0, "s") if unit == "ms" else (float(number), unit)


@pytest.mark.process
def test_the_coordinator_case_at_8_hosts_prints_every_subject_with_a_sane_figure(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    doc = REPO / "docs" / "performance.md"
    before = doc.read_bytes() if doc.exists() else None
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "run.py"), "--only", "coordinator", "--hosts", "8", "--quick",
         "--no-write"],
        cwd=str(tmp_path),
        env=dict(os.environ, **{MARK_VAR: mark}),
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("coordinator ")]
    for subject, unit in SUBJECTS.items():
        row = next((r for r in rows if subject in r), None)
        assert row is not None and "N=8" in row, (subject, done.stdout)
        value, shown = _figure(row)
        assert shown == unit and value >= 0.0, row
        if unit == "%":
            assert value < 200.0, row  # one process: at most its threads' share of the 2 cores
        elif unit == "MB":
            assert 5.0 < value < 1000.0, row  # an interpreter serving 8 hosts
    assert "Targets:" in done.stdout and "all 7 others told within 5 s" in done.stdout
    assert "FAILED" not in done.stdout and "Traceback" not in done.stdout + done.stderr
    after = doc.read_bytes() if doc.exists() else None
    assert before == after, "--no-write must leave docs/performance.md alone"
    assert_nothing_left(mark, variable=MARK_VAR)


def test_a_bad_hosts_list_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "run.py"), "--only", "coordinator", "--hosts", "8,one"],
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1] == (
        "bench/run.py: error: --hosts '8,one' is not a list of numbers; give e.g. 2,64,1024"
    )
    assert "Traceback" not in done.stderr and done.stdout == ""
