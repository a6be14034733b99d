"""The recover case's bookkeeping, pure (its runs are ``bench/run.py --only recover``): the targets' verdicts from
given medians (no timing here), the stamps that tell one attempt's ranks from the one before, and its section."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path
from typing import Dict, Tuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from mabench import recover  # noqa: E402
from mabench.report import OWN_SECTION, section  # noqa: E402
from mabench.results import CaseResult, Series  # noqa: E402


def _series(cold: float, rank: float, host: float, c10d: float) -> Dict[Tuple[str, str], Series]:
    medians = {("ranktable", "cold"): cold, ("ranktable", "rank"): rank, ("ranktable", "host"): host,
               ("torchrun", "cold"): cold, ("torchrun", "rank"): rank, ("torchrun", "host"): host,
               ("c10d", "cold"): cold, ("c10d", "rank"): c10d}  # fmt: skip
    return {key: Series(f"recover/{key[0]}/{key[1]}", "recover", recover._SUBJECTS[key[0]], key[1], "s", [value])
            for key, value in medians.items()}  # fmt: skip


def test_a_recovery_passes_within_the_cold_start_plus_one_second() -> None:
    ok = recover._targets(_series(cold=10.0, rank=10.9, host=11.9, c10d=23.0))
    assert [target.ok for target in ok] == [True, True, True, True, True], [t.measured for t in ok]
    short = recover._targets(_series(cold=10.0, rank=11.2, host=12.2, c10d=11.0))
    assert [target.ok for target in short] == [False, False, False, False, False]
    assert "cold start + back-off (0) + 1 s" in ok[0].claim and "replacement" in ok[1].claim


def test_the_stamps_of_each_attempt_are_its_new_processes(tmp_path: Path) -> None:
    stamps = recover._Stamps(tmp_path)
    for pid, rank, first in ((101, "0", "5.0"), (102, "1", "5.5")):
        (tmp_path / f"pid-{pid}").write_text(rank)
        (tmp_path / f"first-{pid}").write_text(first)
    (tmp_path / "first-103.tmp").write_text("1.0")
    assert stamps.first_step() == 5.0 and stamps.rank(1) == 102
    for pid, rank, first in ((201, "1", "9.0"), (202, "0", "8.5")):
        (tmp_path / f"pid-{pid}").write_text(rank)
        (tmp_path / f"first-{pid}").write_text(first)
    assert stamps.first_step() == 8.5 and stamps.rank(1) == 201


def test_the_section_has_its_table_targets_and_ratios() -> None:
    assert "recover" in OWN_SECTION
    series = _series(cold=10.0, rank=5.0, host=6.0, c10d=20.0)
    result = CaseResult("recover", list(series.values()), recover._targets(series))
    text = section(result, "python bench/run.py --only recover", datetime.datetime(2026, 11, 28, 6, 0), 9.0,
                   {"nproc": "2", "load average (1/5/15 min)": "1, 2, 3"})  # fmt: skip
    assert "## Time to recover: a failure to the first step of the next attempt" in text
    assert "| shim, fan-out (ranktable) | 10.00 s | 5.00 s | 0.5 x | 6.00 s | 0.6 x | 1 |" in text, text
    assert "| torchrun agents, c10d | 10.00 s | 20.00 s | 2 x | - | - | 1 |" in text, text
    assert text.startswith("<!-- section recover") and text.endswith("<!-- end of section recover -->")
