"""One home for signals in exit statuses (entrypoint/contract/signals.py): two conventions, each with its own name."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest
from malaunch.entrypoint.contract.signals import signal_in_any_code, signal_in_shell_code, signal_name
from malaunch.entrypoint.report.failure_class import classify_failure
from malaunch.entrypoint.report.report import describe_exit

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("code", "given", "shell", "any_code"),
    [
        (137, None, 9, 9),
        (143, None, 15, 15),
        (129, None, 1, 1),
        (192, None, 64, 64),
        (193, None, None, None),
        (128, None, None, None),
        (1, None, None, None),
        (0, None, None, None),
        (-9, None, None, 9),
        (-15, None, None, 15),
        (1, 6, 6, 6),
        (-9, 11, 11, 11),
    ],
)
def test_the_two_conventions(code: int, given: Optional[int], shell: Optional[int], any_code: Optional[int]) -> None:
    assert signal_in_shell_code(code, given) == shell
    assert signal_in_any_code(code, given) == any_code


def test_popen_returncode_is_the_any_code_convention() -> None:
    proc = subprocess.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert proc.returncode == -9
    assert signal_in_any_code(proc.returncode, None) == 9 and signal_in_shell_code(proc.returncode, None) is None


def test_names() -> None:
    assert signal_name(9) == "SIGKILL" and signal_name(77) == "signal 77"


def test_the_report_and_the_classifier_read_the_same_signal() -> None:
    assert describe_exit(137, None).startswith("killed by SIGKILL")
    assert describe_exit(-9, None).startswith("exited with code -9")  # the report shows a negative code as is
    assert classify_failure(-9).reason == "killed by signal 9 (exit code 137)"
    assert classify_failure(137).reason == "killed by signal 9 (exit code 137)"


def test_no_other_module_reads_signals_out_of_codes_itself() -> None:
    own = []
    for path in sorted((ROOT / "entrypoint").rglob("*.py")):
        text = path.read_text()
        if re.search(r"def _?signal_of\b|code - 128\b|exit_code - 128\b", text) and path.name != "signals.py":
            own.append(path.name)
    assert own == []
