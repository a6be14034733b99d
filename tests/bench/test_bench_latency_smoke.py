"""Smoke test of the latency case: ``bench/run.py --only latency --reps 1 --no-write`` follows a real local job on
this tree and on main, and times the 32,768-rank dry-run. No timing is asserted: every subject has a figure in its
unit in both columns (a follower that lost a line would leave its row without one), and the case leaves no process
and no change to docs/performance.md behind, nor main's checkout (a git worktree of this repository) unless it was
there before. The section it would write has its own title and both columns.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from shimutil import assert_nothing_left

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from mabench.baseline import baseline_tree, resolve_commit  # noqa: E402
from mabench.report import OWN_SECTION, section  # noqa: E402
from mabench.results import CaseResult, Series  # noqa: E402

MARK_VAR = "BENCH_SMOKE_TEST_MARK"
SUBJECTS = {
    "logs -f: rank writes -> line shown, median": ("ms",),
    "logs -f: rank writes -> line shown, 90th percentile": ("ms",),
    "logs -f idle: CPU share of one core": ("%",),
    "ma-entrypoint --dry-run, 32768 ranks": ("ms", "s"),
    "python -c pass (the bare interpreter)": ("ms", "s"),
    "ma-submit --dry-run, Volcano 2048 x 16 (informational)": ("ms", "s"),
}


@pytest.mark.process
def test_the_latency_case_measures_both_trees(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    doc = REPO / "docs" / "performance.md"
    before = doc.read_bytes()
    main_tree = baseline_tree(resolve_commit("main")[:8])  # the bench checks main out there, for later runs too
    kept = main_tree.exists()
    try:
        done = subprocess.run(
            [sys.executable, str(REPO / "bench" / "run.py"), "--only", "latency", "--reps", "1", "--no-write"],
            cwd=str(tmp_path),
            env=dict(os.environ, **{MARK_VAR: mark}),
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        if not kept:  # this test's checkout goes: the repository keeps no worktree a test run made
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(main_tree)],
                           capture_output=True, timeout=120)  # fmt: skip
            shutil.rmtree(main_tree.parent / f"farm-{main_tree.name}", ignore_errors=True)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("latency ")]
    for subject, units in SUBJECTS.items():
        for tree in ("main (", "this tree"):
            (row,) = [r for r in rows if f" {subject} " in r and tree in r]
            assert any(f" {unit} " in row for unit in units), row
    assert "[pass ] logs -f: a line shown within 20 ms" in done.stdout or "[short] logs -f: a line" in done.stdout
    assert doc.read_bytes() == before, "--no-write must leave docs/performance.md alone"
    assert_nothing_left(mark, variable=MARK_VAR)


def test_the_latency_section_keeps_the_case_s_column_order() -> None:
    items = [
        Series("latency/baseline/x", "latency", "follow", "main (abc)", "s", [0.05]),
        Series("latency/this/x", "latency", "follow", "this tree", "s", [0.001]),
    ]
    text = section(CaseResult("latency", items), "bench/run.py --only latency", datetime.datetime(2026, 1, 1), 1.0,
                   {"nproc": "2"})  # fmt: skip
    assert "latency" in OWN_SECTION
    assert "## Daily-use latency: logs -f and --dry-run" in text
    assert "| Subject | main (abc) | this tree | this tree vs main (abc) | Runs |" in text
    assert "| follow | 50.0 ms | 1.00 ms | 0.02 x | 1 |" in text
    assert "`bench/run.py --only latency` rewrites this section alone." in text
