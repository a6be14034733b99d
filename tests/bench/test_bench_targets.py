"""The benchmark's targets are the ones docs/performance.md argues for (start-up within 25 ms of the floor, log
throughput at least 0.45 x a direct write; 0.05 x torchrun and 80 % of a direct write are retired), and every
target the docs show as short is explained there. The verdicts are computed from given medians: no timing here."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from mabench import budgets, lograte, startup  # noqa: E402
from mabench.results import Series  # noqa: E402

DOC = REPO / "docs" / "performance.md"


def _startup_claims(shim: float, floor: float, passes: Tuple[float, ...] = ()) -> List[Tuple[str, object]]:
    series: Dict[Tuple[int, str], Series] = {}
    firsts: Dict[Tuple[int, str], List[float]] = {}
    for n in startup.SIZES:
        for kind, median in (("shim-ranktable", shim), ("popen", floor), ("torchrun", 1.2), ("msrun", 1.1)):
            series[(n, kind)] = Series(f"startup/{n}/{kind}", "start-up", kind, f"N={n}", "s", [median])
            firsts[(n, kind)] = [median / 2]
    return [(target.claim, target.ok) for target in startup._targets(series, firsts, [0.02], list(passes))]


def test_start_up_is_held_to_the_floor_only() -> None:
    claims = _startup_claims(shim=0.090, floor=0.070)
    assert claims and all("within 25 ms of the floor" in claim for claim, _ in claims), claims
    assert all(ok for _, ok in claims)  # +20 ms
    assert not any(ok for _, ok in _startup_claims(shim=0.100, floor=0.070))  # +30 ms


def test_start_up_is_also_judged_scaled_by_this_machines_interpreter_against_the_issues() -> None:
    # python -c pass at 24 ms against the issue's 18 ms: 25 ms scaled is 33.3 ms
    claims = _startup_claims(shim=0.100, floor=0.070, passes=(0.024, 0.024, 0.025, 0.023))
    stated = [ok for claim, ok in claims if "within 25 ms of the floor" in claim]
    scaled = [(claim, ok) for claim, ok in claims if "scaled to this machine" in claim]
    assert stated and not any(stated)  # +30 ms as stated: short
    assert len(scaled) == len(startup.TARGET_SIZES) and all(ok for _, ok in scaled), scaled
    assert all("25.0 ms x 1.33 = 33.3 ms" in claim for claim, _ in scaled), scaled
    tighter = _startup_claims(shim=0.105, floor=0.070, passes=(0.024,))  # +35 ms
    assert not any(ok for claim, ok in tighter if "scaled" in claim)


def test_the_bound_is_shown_beside_the_budget_and_judges_nothing() -> None:
    series: Dict[Tuple[int, str], Series] = {}
    firsts: Dict[Tuple[int, str], List[float]] = {}
    for n in startup.SIZES:
        for kind, last, first in (("shim-ranktable", 0.120, 0.100), ("popen", 0.070, 0.050),
                                  ("shim-plan-bound", 0.110, 0.085)):  # fmt: skip
            series[(n, kind)] = Series(f"startup/{n}/{kind}", "start-up", kind, f"N={n}", "s", [last])
            firsts[(n, kind)] = [first]
    bounds = [target for target in startup._targets(series, firsts, [0.02], []) if "the bound" in target.claim]
    assert [target.claim for target in bounds] == [
        f"start-up N={n}: the bound (the shim's guards and planning, then the ranks) over the floor"
        for n in startup.TARGET_SIZES
    ]
    assert all(target.ok is None and target.measured == "+40 ms (110 ms)" for target in bounds), bounds
    assert all("first rank runs 35 ms after the floor's" in target.comment for target in bounds), bounds
    assert all("over the 25 ms budget" in target.comment for target in bounds), bounds


def test_a_scaled_budget_never_loosens_on_a_machine_as_fast_as_the_issues() -> None:
    assert budgets.machine_factor(budgets.ISSUE_FLOOR) == 1.0
    assert budgets.scaled_target("verb", 0.0601, 0.060, 0.018).ok is False
    assert budgets.scaled_target("verb", 0.0599, 0.060, 0.018).ok is True
    faster = budgets.scaled_target("verb", 0.055, 0.060, 0.015)  # a faster machine tightens it: 50 ms
    assert faster.ok is False and "= 50.0 ms" in faster.claim and "15.0 ms" in faster.comment


def test_start_up_in_cpu_time_is_the_shims_excess_over_the_floor_of_the_same_repetition() -> None:
    cpus: Dict[Tuple[int, str], List[float]] = {}
    for n in startup.TARGET_SIZES:
        cpus[(n, "popen")] = [0.040, 0.060, 0.050]
        cpus[(n, "shim-ranktable")] = [0.060, 0.084, 0.071]  # +20, +24, +21 ms in the same repetitions
        cpus[(n, "shim-ranktable@this")] = [0.070] * 6  # run six times a repetition: medians compared
        cpus[(n, "shim-ranktable@baseline")] = [0.060] * 6
    targets = startup._cpu_targets(cpus, "abc123")
    budget = [target for target in targets if target.ok is not None]
    assert [target.ok for target in budget] == [True] * len(startup.TARGET_SIZES)
    assert all(target.measured.startswith("+21 ms") for target in budget), [t.measured for t in budget]
    side = [target for target in targets if target.ok is None]
    assert all("+20 ms vs +10 ms: +10.0 ms" in target.measured for target in side), [t.measured for t in side]
    cpus[(4, "shim-ranktable")] = [0.070, 0.090, 0.080]  # +30 ms
    assert startup._cpu_targets(cpus, None)[0].ok is False


def test_log_throughput_is_held_to_0_45_of_a_direct_write() -> None:
    target = lograte.log_target(460.0, 1000.0, 540.0)
    assert target.claim == "log throughput: shim >= 0.45 x writing the file directly"
    assert target.ok is True
    assert lograte.log_target(440.0, 1000.0, None).ok is False
    assert lograte.log_target(None, 1000.0, None).ok is None


def _doc_targets() -> List[Tuple[str, str]]:
    text = DOC.read_text()
    table = text.split("## Targets", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ") and "**" in line]
    return [(row[0].lstrip("| "), row[-1].strip(" |*")) for row in rows]


def _unscaled(claim: str) -> str:
    """A claim without the figures a scaled budget takes from its run (the interpreter's factor)."""
    head, scaled, _ = claim.partition(", scaled to this machine")
    return head + scaled


def test_the_docs_show_only_targets_the_bench_has_and_explain_every_short_one() -> None:
    shown = _doc_targets()
    claims = [claim for claim, _ in shown]
    assert shown, "no targets table in docs/performance.md"
    assert not [claim for claim in claims if "x torchrun" in claim and claim.startswith("start-up")], claims
    assert not [claim for claim in claims if "80%" in claim], claims
    made = [claim for claim, _ in _startup_claims(0.09, 0.07, passes=(0.024,))]
    bench_claims = {_unscaled(claim) for claim in made} | {lograte.log_target(1.0, 1.0, None).claim}
    for claim in claims:
        if claim.startswith(("start-up N=", "log throughput")) and "commit" not in claim:
            assert _unscaled(claim) in bench_claims, f"{claim!r} is not a target of the bench"
    explained = DOC.read_text().split("## Where it falls short", 1)
    for claim, verdict in shown:
        if verdict == "short":
            assert len(explained) == 2 and re.search(rf"- \*\*{re.escape(claim)}\*\*: \S", explained[1]), claim


def test_the_hosts_case_times_a_baselines_verbs_beside_this_trees() -> None:
    from mabench import hosts

    env = {"PATH": "/usr/bin", "KUBECONFIG": "/scratch/kubeconfig"}
    subjects = hosts._subjects("ml/j-1", env, "abc1234", Path("/farm"))
    ours = ["status ID", "list --backend volcano", "logs ID"]
    assert list(subjects) == [hosts._FLOOR, *ours, *(f"{name} @abc1234" for name in ours)]
    for name in ours:
        argv, run_env = subjects[name]
        their_argv, their_env = subjects[f"{name} @abc1234"]
        assert argv == their_argv and run_env == env and "PYTHONPATH" not in run_env
        assert their_env == {**env, "PYTHONPATH": "/farm"}
    assert list(hosts._subjects("ml/j-1", env, None, None)) == [hosts._FLOOR, *ours]
    series = [Series(f"hosts/{n}/{name}", "hosts", name, f"{n} hosts", "s", [value * n])
              for n in (1, 4) for name, value in (("status ID", 0.4), ("status ID @abc1234", 1.2))]  # fmt: skip
    side = [t for t in hosts._targets(series, (1, 4), "abc1234") if "against commit" in t.claim]
    assert [(t.claim, t.measured, t.ok) for t in side] == [
        ("status ID at 1 hosts: this tree against commit abc1234's", "400 ms vs 1.20 s: 0.333 x", None),
        ("status ID at 4 hosts: this tree against commit abc1234's", "1.60 s vs 4.80 s: 0.333 x", None),
    ]
