"""Smoke test of the benchmark harness: ``bench/run.py --only ranktable-scale --no-write --quick`` runs and prints
a table row. No timing is asserted; the test only proves the harness works end to end and leaves nothing running.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import List

import pytest

REPO = Path(__file__).resolve().parents[2]
MARK_VAR = "BENCH_SMOKE_TEST_MARK"


def _marked(mark: str) -> List[int]:
    needle = f"{MARK_VAR}={mark}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if needle in handle.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


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
    deadline = time.monotonic() + 15
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _marked(mark) == [], "the benchmark left processes running"
