"""The shim's observable behaviour, byte for byte: dry-run JSON, report.json, exit codes and console output.

Each case of ``tests/entrypoint/golden/capture.py`` (its docstring lists the matrix and every normalisation) is
run with the real shim, torchrun and msrun, and compared with ``tests/entrypoint/golden/expected/<case>.json``.
A redesign that changes nothing observable keeps every case equal.

Regenerating the expected files (after a change that is meant to change the output; the committed goldens
were captured on main after issue 16 merged, the race cases of ``RACES`` checked by hand to name the right rank):

    cd <repo> && rm -rf tests/entrypoint/golden/expected && \\
        PATH=$PWD/.venv/bin:$PATH python tests/entrypoint/golden/capture.py --write tests/entrypoint/golden/expected
    PATH=$PWD/.venv/bin:$PATH python tests/entrypoint/golden/capture.py --write /tmp/golden-again
    diff -r tests/entrypoint/golden/expected /tmp/golden-again    # must print nothing: the capture is stable

then read ``git diff tests/entrypoint/golden/expected`` and commit it with the change. A case whose two captures
differ has a race: fix it, or (if it is the shim's and not yet fixed) name it in ``RACES`` or ``_UNSTABLE``
of ``golden/cases.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from golden import capture, cases

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
EXPECTED = GOLDEN / "expected"

NAMES = [case.name for case in cases.CASES]


def _marks(name: str) -> list[pytest.MarkDecorator]:
    """Every case starts the shim; real runs under torchrun or msrun need torch or mindspore."""
    marks = [pytest.mark.process]
    if name.startswith("run-torchrun-"):
        marks.append(pytest.mark.torch)
    if name.startswith("run-msrun-"):
        marks.append(pytest.mark.mindspore)
    return marks


def test_every_case_has_an_expected_file_and_every_file_a_case() -> None:
    assert len(NAMES) == len(set(NAMES))
    assert sorted(path.stem for path in EXPECTED.glob("*.json")) == sorted(NAMES)


def test_the_matrix_covers_every_method_and_failure_kind() -> None:
    kinds = {(case.kind, case.args[1] if case.kind == "run" else "") for case in cases.CASES}
    assert {("run", mode) for mode in ("ok", "exit", "kill", "flaky")} <= kinds
    assert {"dry", "sigterm", "bad"} <= {kind for kind, _ in kinds}
    for method in ("ranktable", "torchrun", "msrun", "msrun-recovery", "single"):
        assert any(name.startswith(f"dry-{method}") for name in NAMES), method
    for method in ("ranktable", "torchrun", "msrun"):
        runs = [name for name in NAMES if name.startswith(f"run-{method}-") and "-prepare-" not in name]
        assert len(runs) == 5, method
    prepared = sorted(name for name in NAMES if name.startswith("run-") and "-prepare-" in name)
    assert prepared == ["run-ranktable-prepare-failed", "run-ranktable-prepare-ok", "run-ranktable-prepare-timeout"]


@pytest.mark.parametrize("name", [pytest.param(name, marks=_marks(name)) for name in NAMES])
def test_output_matches_the_golden(name: str) -> None:
    (case,) = cases.by_name([name])
    got = capture.capture(case)
    expected = (EXPECTED / f"{name}.json").read_text()
    if got != expected and case.race:
        pytest.xfail(f"known race on main: {case.race}")
    assert got == expected, f"{name}: output changed; see the module docstring to regenerate if intended"
