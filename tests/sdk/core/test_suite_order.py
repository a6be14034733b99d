"""The suite runs its longest tests first (tests/conftest.py, ``longest_first``): a parallel run then never starts
a test of minutes while the other workers are nearly done, and the quick tests fill the gaps at the end. The order
is the one every xdist worker collects, so ``--dist worksteal`` (scripts/test.sh) can hand the tests around."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

TESTS = Path(__file__).resolve().parents[2]

PROBE = """
import pytest


def test_quick_first_collected():
    pass


@pytest.mark.slow
def test_slow():
    pass


@pytest.mark.timeout(600)
def test_ten_minutes():
    pass


@pytest.mark.timeout(60)
def test_quick_with_a_short_timeout():
    pass


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("case", ["a", "b"])
def test_twenty_minutes(case):
    pass


@pytest.mark.process
def test_a_process():
    pass
"""

EXPECTED = [
    "test_twenty_minutes[a]",
    "test_twenty_minutes[b]",
    "test_ten_minutes",
    "test_slow",
    "test_a_process",  # marked slow by the conftest (it starts a process)
    "test_quick_first_collected",
    "test_quick_with_a_short_timeout",
]


def _session(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A pytest session of the probe under the suite's own conftest and the project's timeout (300 s)."""
    tests = tmp_path / "tests"
    tests.mkdir()
    for name in ("conftest.py", "sdk/homeguard.py"):
        shutil.copy(TESTS / name, tests)
    (tests / "test_probe.py").write_text(PROBE)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\ntimeout = 300\nmarkers =\n    slow: seconds\n    process: a process\n    torch: torch\n"
        "    mindspore: mindspore\n    netns: netns\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tests)}
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, "tests"]
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def _names(out: str) -> List[str]:
    return [line.split("::", 1)[1].split()[0] for line in out.splitlines() if line.startswith("tests/test_probe.py::")]


@pytest.mark.slow  # a pytest session each
def test_the_longest_tests_come_first_then_the_slow_then_the_rest(tmp_path: Path) -> None:
    done = _session(tmp_path, "--collect-only", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _names(done.stdout) == EXPECTED, done.stdout


@pytest.mark.slow
def test_workers_share_the_order_so_work_stealing_runs_every_test_once(tmp_path: Path) -> None:
    done = _session(tmp_path, "-n", "2", "--dist", "worksteal", "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    passed = [line.split("::", 1)[1].split()[0] for line in done.stdout.splitlines() if " PASSED " in line]
    assert sorted(passed) == sorted(EXPECTED), done.stdout
