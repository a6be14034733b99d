"""Benchmark the shim side by side with torchrun and msrun: ``python bench/run.py [--quick] [--only CASE]``.

One command runs every case, prints a table of figures and ratios measured in this one run, and rewrites
``docs/performance.md`` and ``docs/performance.svg`` (unless ``--no-write`` or ``--only``). Raw samples go to
``bench/results/latest.json`` (not tracked). Cases:

- ``startup``: launcher start -> all N ranks running (N = 4, 8, 16, 32): shim rank-table fan-out, torchrun,
  msrun, and the floor (one fresh interpreter that Popens the N workers);
- ``teardown``: a rank's failing exit -> launcher exit: the shim (ranktable, torchrun, msrun), bare torchrun,
  bare msrun;
- ``log-throughput``: 1 GB of lines through the shim vs written to a file directly;
- ``ranktable-scale``: parse and plan a 2,048 x 16 (32,768-rank) v1.0 rank table in-process, and the whole
  ``ma-entrypoint --dry-run`` on it from this tree's wheel in a fresh venv beside its ``python -c pass``
  (``--only ranktable-scale`` rewrites its section);
- ``local-backend``: a 4 x 4 job through the SDK's local backend, submit -> done;
- ``obs-upload``: the ModelArts code upload (first and unchanged re-upload) against a plain 10-thread boto3
  upload, on moto's S3 server on 127.0.0.1, at 2,000 and 20,000 files (``--quick``: 2,000);
- ``verbs``: ``ma-submit --help``, ``list``, ``status``, ``logs`` and ``stop`` of an ended local job against
  ``python -c pass``, each verb's excess over that floor (``--only verbs`` rewrites its own section; with
  ``--baseline REF`` commit REF's verbs run in the same rounds);
- ``coordinator``: the hosts' coordinator (issue 25) with N = 2, 64, 1,024 emulated hosts speaking its protocol
  on 127.0.0.1 (``--hosts`` chooses the sizes): its CPU share and memory under heartbeats, and the time from a
  host's death (SIGKILLed; SIGSTOPped) to every other host told. Its figures have a section of their own in
  ``docs/performance.md``, which ``--only coordinator`` rewrites alone (about 2 minutes).
- ``history``: ``ma-submit list`` and ``status`` of a local home with 1, 100, 1,000 and 10,000 ended jobs, this
  tree's and main's (``--baseline``, default main) beside a bare interpreter; ``--only history`` rewrites its section.
- ``hosts``: ``ma-submit status``, ``list``, ``logs``, and ``logs -f``'s lag and idle CPU, of a Volcano job of 1,
  16, 128 and 1,024 hosts on the tests' fake API server, beside a bare interpreter (``--baseline REF`` adds
  commit REF's status, list and logs); ``--only hosts`` rewrites its section.
- ``ui``: ``ma-submit ui``'s jobs page with 10 and 10,000 ended jobs, a rank's line into an open page (headless
  Chromium), and the idle server's CPU; ``--only ui`` rewrites its section.
- ``recover``: time to recover (issue 39): a rank killed and a host lost (2 hosts, the shim with the fan-out and
  with torchrun, through the local backend) -> the first step of the next attempt, beside a cold start of the same
  script and torchrun's own agents (c10d, ``--max-restarts=1``) on the same rank killed; ``--only recover``
  rewrites its section.

``--baseline REF`` adds this tree's shim and commit REF's to ``startup``, side by side in the same run (start-up
before the first rank, e.g. before and after a refactor; ``bench/mabench/baseline.py``).

Run it with the project venv (``bash scripts/setup.sh`` first): ``.venv/bin/python bench/run.py``. A full run
takes about 12-17 minutes, ``--quick`` about 5 (the coordinator case about 1.5 of them).
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mabench.coordinator import parse_sizes, run_coordinator, window_seconds
from mabench.history import run_history
from mabench.hosts import run_hosts
from mabench.latency import run_latency
from mabench.localjob import run_local_backend
from mabench.lograte import run_log_throughput
from mabench.obsupload import run_obs_upload
from mabench.procs import BENCH_DIR, REPO
from mabench.recover import run_recover
from mabench.report import OWN_SECTION, console_table, write_docs, write_section
from mabench.results import CaseResult, say
from mabench.scale import run_scale
from mabench.startup import run_startup
from mabench.teardown import run_teardown
from mabench.uipage import run_ui
from mabench.verbs import run_verbs

__all__ = ["CASES", "main"]

CASES = (
    "startup", "teardown", "log-throughput", "ranktable-scale", "local-backend", "obs-upload", "coordinator", "verbs",
    "latency",
    "history", "hosts", "ui", "recover",
)  # fmt: skip


def _settings(quick: bool, reps: Optional[int]) -> Dict[str, int]:
    base = (
        {"reps": 2, "msrun_reps": 1, "log_reps": 2, "log_bytes": 300_000_000, "scale_reps": 3, "local_reps": 1,
         "obs_reps": 1, "obs_large": 0, "coord_reps": 1, "quick": 1}
        if quick
        else {"reps": 5, "msrun_reps": 3, "log_reps": 5, "log_bytes": 1_000_000_000, "scale_reps": 7, "local_reps": 3,
              "obs_reps": 3, "obs_large": 1, "coord_reps": 1, "quick": 0}
    )  # fmt: skip
    if reps is not None:
        base.update(
            reps=reps,
            msrun_reps=min(reps, base["msrun_reps"]),
            log_reps=reps,
            scale_reps=reps,
            local_reps=reps,
            obs_reps=reps,
            coord_reps=reps,
        )
    return base


def _runners(
    s: Dict[str, int], baseline: Optional[str] = None, hosts: Sequence[int] = ()
) -> Dict[str, Callable[[], CaseResult]]:
    return {
        "startup": lambda: run_startup(s["reps"], baseline),
        "teardown": lambda: run_teardown(s["reps"], s["msrun_reps"]),
        "log-throughput": lambda: run_log_throughput(s["log_reps"], s["log_bytes"]),
        "ranktable-scale": lambda: run_scale(s["scale_reps"], baseline),
        "local-backend": lambda: run_local_backend(s["local_reps"]),
        "obs-upload": lambda: run_obs_upload((2_000, 20_000) if s["obs_large"] else (2_000,), s["obs_reps"]),
        "coordinator": lambda: run_coordinator(hosts, s["coord_reps"], window_seconds(bool(s["quick"]))),
        "verbs": lambda: run_verbs(s["reps"] * 4, baseline),
        "latency": lambda: run_latency(s["scale_reps"], s["local_reps"], baseline or "main"),
        "history": lambda: run_history(s["reps"], baseline or "main"),
        "hosts": lambda: run_hosts(s["reps"], baseline=baseline),
        "ui": lambda: run_ui(s["reps"]),
        "recover": lambda: run_recover(s["reps"]),
    }


def _describe(case: str, s: Dict[str, int], hosts: Sequence[int] = ()) -> str:
    return {
        "startup": f"N=4, 8, 16, 32; floor, shim (ranktable), torchrun, msrun; {s['reps']} runs each",
        "teardown": f"N=4; shim x3 methods, torchrun, msrun; {s['reps']} runs each, bare msrun {s['msrun_reps']} "
        "(~1 min each)",
        "log-throughput": f"{s['log_bytes'] / 1e6:.0f} MB through the shim vs to a file (and the shim's peak RSS); "
        f"{s['log_reps']} runs each",
        "ranktable-scale": f"2,048 x 16 v1.0 table, in-process; {s['scale_reps']} runs; --dry-run wheel vs editable",
        "local-backend": f"4 hosts x 4 ranks via Job(...).submit(); {s['local_reps']} runs",
        "obs-upload": f"{'2,000 and 20,000' if s['obs_large'] else '2,000'} files (one of 20 MB) on moto's S3 "
        f"server: plain boto3 vs malaunch first and unchanged; {s['obs_reps']} runs",
        "coordinator": f"N={', '.join(str(n) for n in hosts)} emulated hosts; timeouts 20 s (SIGKILL) and 2 s "
        f"(SIGSTOP); {s['coord_reps']} run(s) each",
        "verbs": f"python -c pass vs ma-submit --help, submit --help, list, status, logs, events, stop; "
        f"{s['reps'] * 4} rounds",
        "latency": f"logs -f ({s['local_reps']} job(s)) and the 32,768-rank --dry-run ({s['scale_reps']} runs), "
        "this tree and main",
        "history": f"list/status at 1 to 10,000 jobs, this tree and main; {s['reps']} runs each",
        "hosts": f"status/list/logs/logs -f of a Volcano job of 1 to 1,024 hosts (stand-in); {s['reps']} runs each",
        "ui": f"ma-submit ui: jobs page at 10 and 10,000 jobs ({s['reps'] * 4} loads), {s['reps'] * 2} lines into an "
        "open page (Chromium), idle CPU",
        "recover": f"2 hosts: cold start, a rank killed, a host lost (shim: fan-out, torchrun) beside torchrun's c10d "
        f"agents; {s['reps']} runs each",
    }[case]


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``bench/run.py``."""
    parser = argparse.ArgumentParser(
        prog="bench/run.py",
        description="Measure the malaunch shim side by side with torchrun and msrun and report figures, ratios "
        "and the issue's targets (pass/short). Rewrites docs/performance.md and docs/performance.svg.",
        epilog=f"cases: {', '.join(CASES)}",
    )
    parser.add_argument("--quick", action="store_true", help="fewer runs and 300 MB of log instead of 1 GB")
    parser.add_argument(
        "--only",
        action="append",
        choices=CASES,
        metavar="CASE",
        help="run only this case (repeatable); docs/performance.md is not rewritten, except the section of a case "
        f"that has one of its own ({', '.join(OWN_SECTION)}) unless --no-write",
    )
    parser.add_argument("--no-write", action="store_true", help="do not rewrite docs/performance.md and .svg")
    parser.add_argument("--reps", type=int, help="runs per timing (overrides the defaults; bare msrun stays <= 3)")
    parser.add_argument(
        "--hosts",
        metavar="N,N,...",
        help="the coordinator case's job sizes in hosts (default 2,64,1024; each 2 to 4096)",
    )
    parser.add_argument(
        "--baseline",
        metavar="REF",
        help="start-up also runs this tree's shim and commit REF's side by side (e.g. the commit before a refactor); "
        "so do the verbs and the hosts case (its status, list and logs); latency and history compare with it too "
        "(default main)",
    )
    return parser


def _command_line(argv: Sequence[str]) -> str:
    python = sys.executable
    shown = os.path.relpath(python, REPO) if python.startswith(str(REPO) + os.sep) else "python"
    return " ".join([shown, "bench/run.py", *argv])


def _compile_package() -> None:
    """Give the package its bytecode, as a pip-installed wheel has it (an editable install has none, and these
    machines set PYTHONDONTWRITEBYTECODE, so every shim start would otherwise compile it from source)."""
    root = BENCH_DIR.parent
    for folder in ("entrypoint", "sdk"):
        compileall.compile_dir(str(root / folder), quiet=1)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the chosen cases; returns 0 when every case produced figures, 1 when one of them failed outright."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(args_list)
    if args.reps is not None and args.reps < 1:
        build_parser().error(f"--reps must be at least 1, got {args.reps}")
    if args.baseline is not None:
        from mabench.baseline import resolve_commit
        from mabench.procs import BenchError

        try:
            resolve_commit(args.baseline)
        except BenchError as exc:
            build_parser().error(str(exc))
    try:
        hosts = parse_sizes(args.hosts)
    except ValueError as exc:
        build_parser().error(str(exc))
    settings = _settings(args.quick, args.reps)
    _compile_package()
    chosen = [case for case in CASES if not args.only or case in args.only]
    started = datetime.datetime.now(datetime.timezone.utc)
    load_at_start = os.getloadavg()
    say("load average at the start (1/5/15 min): " + ", ".join(f"{x:.2f}" for x in load_at_start))
    began = time.monotonic()
    runners = _runners(settings, args.baseline, hosts)
    results: List[CaseResult] = []
    for case in chosen:
        say(f"{case}: starting ({_describe(case, settings, hosts)})")
        t0 = time.monotonic()
        try:
            result = runners[case]()
        except Exception as exc:  # a harness bug or a missing dependency: report it, keep the other cases
            result = CaseResult(case, [], error=f"{type(exc).__name__}: {exc}")
        result.seconds = time.monotonic() - t0
        results.append(result)
        state = f"FAILED: {result.error}" if result.error else "done"
        say(f"{case}: {state} in {result.seconds:.0f} s")
    minutes = (time.monotonic() - began) / 60
    print()
    print(console_table(results))
    print()
    out_dir = BENCH_DIR / "results"
    out_dir.mkdir(exist_ok=True)
    raw = {
        "command": _command_line(args_list),
        "started": started.isoformat(),
        "series": [item.to_json() for r in results for item in r.series],
        "targets": [
            {"claim": t.claim, "measured": t.measured, "verdict": t.verdict, "comment": t.comment}
            for r in results
            for t in r.targets
        ],
    }
    (out_dir / "latest.json").write_text(json.dumps(raw, indent=1))
    own = [r for r in results if r.case in OWN_SECTION and r.series]
    if args.only and own and not args.no_write:
        for result in own:
            path = write_section(result, _command_line(args_list), started, minutes, load_at_start)
            say(f"rewrote the {result.case} section of {os.path.relpath(path, REPO)}")
    elif args.no_write or args.only:
        say(f"raw samples: {out_dir / 'latest.json'}; docs/performance.md not rewritten")
    else:
        for path in write_docs(results, _command_line(args_list), started, minutes, load_at_start):
            say(f"wrote {os.path.relpath(path, REPO)}")
    say(f"total {minutes:.1f} min")
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
