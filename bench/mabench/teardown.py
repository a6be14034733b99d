"""Teardown: a rank's failing exit -> the launcher's exit, with N = 4 ranks and rank 1 failing.

Compared on ``workers/fail_worker.py``: the shim with each method (ranktable, torchrun, msrun), bare
``torchrun --standalone`` and bare ``msrun``. The failing rank writes its timestamp right before
``os._exit(1)``; the others sleep and honour SIGTERM. Under msrun (bare or through the shim) every rank has
called ``mindspore.communication.init()`` first, and ``--cluster_time_out`` stays at its default (600 s).
A sample is ``launcher exit (seen by a blocking waitpid) - failure timestamp``.

The msrun failure cases take long (bare msrun waits for its scheduler, ~46 s here), so bare msrun is
repeated fewer times (``msrun_reps``). Launchers are interleaved within each repetition, order rotated.
"""

from __future__ import annotations

import shutil
from typing import Dict, List, Sequence

from .commands import SUBJECTS, command
from .procs import WORKERS, BenchError, marked_pids, new_mark, read_stamps, scratch_dir, start, tail
from .results import CaseResult, Series, Target, fmt_ratio, fmt_value, say

__all__ = ["KINDS", "RANKS", "run_teardown"]

KINDS = ("shim-ranktable", "shim-torchrun", "shim-msrun", "torchrun", "msrun")
RANKS = 4
FAIL_RANK = 1
SCRIPT = WORKERS / "fail_worker.py"


def _uses_mindspore(kind: str) -> bool:
    return kind in ("msrun", "shim-msrun")


def measure_once(kind: str) -> tuple[float, int]:
    """One teardown sample (seconds) and the number of marked processes still alive when the launcher exited."""
    scratch = scratch_dir(f"teardown-{kind}")
    out = scratch / "out"
    out.mkdir()
    try:
        mark = new_mark()
        extra = {"BENCH_OUT": str(out), "BENCH_NRANKS": str(RANKS), "BENCH_FAIL_RANK": str(FAIL_RANK)}
        args = ("--ms-init",) if _uses_mindspore(kind) else ()
        argv, env = command(kind, RANKS, SCRIPT, args, scratch, mark, extra)
        run = start(SUBJECTS[kind], argv, env, scratch, stderr=scratch / "stderr.txt")
        try:
            exited = run.wait_exit(900.0 if kind == "msrun" else 300.0)
            left = len(marked_pids(mark))
        finally:
            run.cleanup()
        stamps = read_stamps(out, "fail")
        if len(stamps) != 1:
            raise BenchError(
                f"{SUBJECTS[kind]}: the failing rank never failed (exit {run.proc.returncode}, "
                f"{len(read_stamps(out, 'ready'))} of {RANKS} ranks ready); stderr ends with:\n"
                + tail(scratch / "stderr.txt")
            )
        if run.proc.returncode == 0:
            raise BenchError(f"{SUBJECTS[kind]} exited 0 although rank {FAIL_RANK} failed")
        return exited - stamps[0], left
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _rotated(kinds: Sequence[str], rep: int) -> List[str]:
    shift = rep % len(kinds)
    return list(kinds[shift:]) + list(kinds[:shift])


def _ratio_target(claim: str, ours: Series, theirs: Series, limit: float) -> Target:
    a, b = ours.median, theirs.median
    if a is None or b is None:
        return Target(claim, "not measured", None)
    ratio = a / b
    return Target(claim, f"{fmt_ratio(ratio)} ({fmt_value(a, 's')} vs {fmt_value(b, 's')})", ratio <= limit)


def run_teardown(reps: int, msrun_reps: int) -> CaseResult:
    """Measure every launcher ``reps`` times (bare msrun ``msrun_reps`` times); returns series and targets."""
    series: Dict[str, Series] = {
        kind: Series(f"teardown/{kind}", "teardown", SUBJECTS[kind], f"N={RANKS}, rank {FAIL_RANK} fails", "s")
        for kind in KINDS
    }
    leftovers: Dict[str, List[int]] = {kind: [] for kind in KINDS}
    for rep in range(reps):
        for kind in _rotated(KINDS, rep):
            item = series[kind]
            if item.error or (kind == "msrun" and rep >= msrun_reps):
                continue
            say(f"  teardown rep {rep + 1}/{reps} {item.subject}: running" + (" (~1 min)" if kind == "msrun" else ""))
            try:
                value, left = measure_once(kind)
            except BenchError as exc:
                item.error = str(exc).splitlines()[0]
                say(f"  teardown rep {rep + 1}/{reps} {item.subject}: FAILED: {exc}")
                continue
            item.samples.append(value)
            leftovers[kind].append(left)
            say(
                f"  teardown rep {rep + 1}/{reps} {item.subject}: {fmt_value(value, 's')}"
                + (f" ({left} processes still alive at launcher exit)" if left else "")
            )
    for kind, counts in leftovers.items():
        if any(counts):
            series[kind].note = f"processes of the job still alive when it exited: {counts}"
    for kind in ("msrun", "shim-msrun"):
        extra = "cluster_time_out default 600 s; every rank called init() first"
        series[kind].note = "; ".join(filter(None, [extra, series[kind].note]))
    result = CaseResult("teardown", list(series.values()), _targets(series))
    result.notes.append(
        "teardown = the failing rank's timestamp right before os._exit(1) -> the launcher's exit seen by a blocking "
        "waitpid; the other ranks sleep and exit on SIGTERM. msrun runs (bare and through the shim) keep "
        "--cluster_time_out at its default (600 s)."
    )
    return result


def _targets(series: Dict[str, Series]) -> List[Target]:
    torch, ms = series["torchrun"], series["msrun"]
    return [
        _ratio_target("teardown: shim (ranktable) <= 0.2 x torchrun", series["shim-ranktable"], torch, 0.2),
        _ratio_target("teardown: shim (torchrun) <= 0.2 x torchrun", series["shim-torchrun"], torch, 0.2),
        _ratio_target("teardown: shim (msrun) <= 0.01 x msrun", series["shim-msrun"], ms, 0.01),
        _ratio_target("teardown: shim (ranktable) <= 0.01 x msrun", series["shim-ranktable"], ms, 0.01),
    ]
