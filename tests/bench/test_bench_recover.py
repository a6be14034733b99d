"""The recover case's bookkeeping, pure (its runs are ``bench/run.py --only recover``): the targets' verdicts from
given medians (no timing here), the stamps that tell one attempt's ranks from the one before, and its section."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path
from typing import Dict, Tuple

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from mabench import recover  # noqa: E402
from mabench.procs import PYTHON, BenchError, bench_env, new_mark, start  # noqa: E402
from mabench.report import OWN_SECTION, section  # noqa: E402
from mabench.results import CaseResult, Series  # noqa: E402


def _series(cold: float, rank: float, host: float, c10d: float) -> Dict[Tuple[str, str], Series]:
    medians = {("ranktable", "cold"): cold, ("ranktable", "rank"): rank, ("ranktable", "host"): host,
               ("torchrun", "cold"): cold, ("torchrun", "rank"): rank, ("torchrun", "host"): host,
               ("c10d", "cold"): cold, ("c10d", "rank"): c10d * 2,
               ("c10d-fresh", "cold"): cold, ("c10d-fresh", "rank"): c10d}  # fmt: skip
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


def test_agents_that_all_exited_end_the_wait_with_the_refusal_they_logged(tmp_path: Path) -> None:
    """torch's defaults: both restarted workers refused by gloo, both agents gone (or one: the other can only wait
    for it); the wait for a first step ends at once with that line, not after its 240 s."""
    logs = [tmp_path / "agent-0.txt", tmp_path / "agent-1.txt"]
    env = bench_env(new_mark(), {})
    said = ("[E1128 08:53:03.221852215 ProcessGroupGloo.cpp:67] Gloo connectFullMesh failed with [pair.cc:152] timed "
            "out connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:10657$0")  # fmt: skip
    code = f"import sys; sys.stderr.write({said!r} + '\\n'); raise SystemExit(1)"
    runs = [start(f"agent {index}", [PYTHON, "-c", code], env, tmp_path, stderr=logs[index]) for index in (0, 1)]
    for run in runs:
        run.proc.wait(timeout=60)
    gone = recover.agents_gone(runs, logs)
    with pytest.raises(BenchError) as caught:
        recover._Stamps(tmp_path).first_step(within=60.0, gone=gone)
    first = str(caught.value).splitlines()[0]
    assert first.startswith("every agent exited (codes 1, 1); agent 0 logged: [E1128") and "Connection refused" in first
    assert "no attempt made a first step on 2 new ranks" in first
    alive = start("agent", [PYTHON, "-c", "import time; time.sleep(60)"], env, tmp_path)
    try:
        assert recover.agents_gone([alive], logs)() is None  # it runs: keep waiting
        said = recover.agents_gone([runs[0], alive], logs)()  # one exited: the other can only wait for it
        assert said is not None and said.startswith("agent 0 exited (code 1), the other waits; agent 0 logged: ")
    finally:
        alive.cleanup()


def test_the_section_has_its_table_targets_and_ratios() -> None:
    assert "recover" in OWN_SECTION
    series = _series(cold=10.0, rank=5.0, host=6.0, c10d=20.0)
    result = CaseResult("recover", list(series.values()), recover._targets(series))
    text = section(result, "python bench/run.py --only recover", datetime.datetime(2026, 11, 28, 6, 0), 9.0,
                   {"nproc": "2", "load average (1/5/15 min)": "1, 2, 3"})  # fmt: skip
    assert "## Time to recover: a failure to the first step of the next attempt" in text
    assert "| shim, fan-out (ranktable) | 10.00 s | 5.00 s | 0.5 x | 6.00 s | 0.6 x | 1 |" in text, text
    assert "| torchrun agents, c10d (torch's defaults) | 10.00 s | 40.00 s | 4 x | - | - | 1 |" in text, text
    fresh = "torchrun agents, c10d, a store per round (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1)"
    assert f"| {fresh} | 10.00 s | 20.00 s | 2 x | - | - | 1 |" in text, text
    assert "faster than torchrun's own agents (c10d, a store per round) | 0.25 x (5.00 s vs 20.00 s)" in text, text
    assert text.startswith("<!-- section recover") and text.endswith("<!-- end of section recover -->")
