"""What ``ma-submit`` prints before any verb does its work, byte for byte: the group's help however it is asked
(``--help``, ``-h``, no arguments; at 60 and 79 columns as at 100), ``--version``, an unknown option, a did-you-mean,
a job file run with ``--dry-run`` (text and JSON), and the help of the verbs
:mod:`test_cli_golden` does not already record.

Recorded from the tree where every verb was imported up front, so that loading each verb only when it runs (issue
28) is proved to change none of it. The records live in ``golden/start/`` and are written and compared like the
other CLI goldens (``MALAUNCH_UPDATE_GOLDEN=1`` rewrites them); the help of every verb and of ``sweep``'s verbs,
the unknown verb and the templates' dry runs are in ``golden/cli/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Tuple

import pytest
from test_cli_golden import _BOOT, _GOOD, Case, assert_golden, capture

pytestmark = pytest.mark.process

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "start"
_FILES = {"job.yaml": _GOOD, "boot.py": _BOOT}

_ARGS: Dict[str, Tuple[str, ...]] = {
    "help-long": ("--help",),
    "help-short": ("-h",),
    "no-arguments": (),
    "version": ("--version",),
    "unknown-option": ("--no-such-option",),
    "unknown-option-of-verb": ("status", "--no-such-option", "some-job"),
    "did-you-mean": ("stauts",),
    "did-you-mean-with-help": ("lsit", "--help"),
    "verb-without-argument": ("status",),
    "dry-run-text": ("--dry-run", "job.yaml"),
    "dry-run-json": ("--dry-run", "--output", "json", "job.yaml"),
    "dry-run-submit-verb": ("submit", "--dry-run", "job.yaml"),
    "job-file-named-like-verb": ("--dry-run", "./status"),
    "help-sweep-run": ("sweep", "run", "--help"),
    "help-configure-list": ("configure", "list", "--help"),
    "help-short-of-verb": ("logs", "-h"),
    "help-configure-show": ("configure", "show", "--help"),
    "help-notify-test": ("notify", "test", "--help"),
    "help-list-short": ("list", "-h"),
    "options-before-verb": ("--backend", "local", "--output", "json", "list"),
    "status-unknown-json": ("status", "no-such-job", "--output", "json"),
    "logs-unknown-tail": ("logs", "no-such-job", "--tail", "5"),
    "list-limit-bad": ("list", "--limit", "many"),
    "help-then-more": ("--help", "list"),
}
CASES = tuple(Case(name, args, {**_FILES, "status": _GOOD}) for name, args in _ARGS.items())


#: The group's help at widths click renders itself (narrower than 80 columns: the stored text was not used).
_NARROW = {"help-narrow-60": "60", "help-narrow-79": "79"}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_start_golden(case: Case, cli_env: Dict[str, str], tmp_path: Path, home: Path) -> None:
    assert_golden(case.name, capture(case, cli_env, tmp_path, home), GOLDEN / f"{case.name}.json")


@pytest.mark.parametrize("name", sorted(_NARROW))
def test_group_help_at_narrow_widths(name: str, cli_env: Dict[str, str], tmp_path: Path, home: Path) -> None:
    case = Case(name, ("--help",), _FILES)
    assert_golden(name, capture(case, cli_env, tmp_path, home, _NARROW[name]), GOLDEN / f"{name}.json")
