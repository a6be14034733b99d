"""``ma-entrypoint BOOT_FILE [ARGS...]``: the container ENTRYPOINT.

``main(argv, environ) -> int`` is the one place that decides the shim's exit code:

- 0 when every process succeeded;
- the root-cause rank's own exit code (128+N for a rank killed by signal N) when a rank failed;
- 128+S when the shim itself received signal S (SIGTERM -> 143, SIGINT -> 130);
- 2 for invalid input (environment variable, argument, rank table), 3 when the launch could not proceed.

Options given on the command line override the ``MALAUNCH_*`` variables of the same meaning.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List, Mapping, Optional, Sequence

from ._recovery_run import run_recovery
from .cluster_env import parse_cluster_env
from .errors import EntrypointError, exit_code_for
from .ms_recovery import is_recovery_plan, plan_with_recovery, recovery_delay
from .plan import LaunchPlan
from .prepare import gather_inputs
from .report import format_failure, report_json, write_report
from .restarts import RestartOutcome, parse_restart_policy, plan_attempt, restart_report, run_with_restarts
from .supervisor import run_plan

__all__ = ["build_parser", "console_main", "main"]

PROG = "ma-entrypoint"


def build_parser() -> argparse.ArgumentParser:
    """The shim's argument parser; options must come before BOOT_FILE, everything after it is the script's."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Start BOOT_FILE the way the platform environment asks (MA_RUN_METHOD: rank-table fan-out, torchrun or "
            "msrun), supervise every process, and exit with the failing rank's own exit code. "
            "See docs/entrypoint.md for every environment variable."
        ),
        epilog=(
            "exit codes: 0 success; the root-cause rank's code; 128+N after signal N; 2 invalid input; "
            "3 launch error"
        ),
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the launch plan as JSON and start nothing"
    )
    parser.add_argument("--log-dir", metavar="DIR", help="per-rank logs go here (env MALAUNCH_LOG_DIR)")
    parser.add_argument(
        "--report-file", metavar="FILE", help="write the JSON run report here (env MALAUNCH_REPORT_FILE)"
    )
    parser.add_argument(
        "--grace-period",
        metavar="SECONDS",
        help="time between SIGTERM and SIGKILL when the group is torn down (env MALAUNCH_GRACE_PERIOD, default 30)",
    )
    parser.add_argument("boot_file", metavar="BOOT_FILE", help="the training script to start")
    parser.add_argument(
        "args", metavar="ARGS", nargs=argparse.REMAINDER, help="arguments for the training script"
    )
    return parser


def _overlay(environ: Mapping[str, str], options: argparse.Namespace) -> Dict[str, str]:
    merged = dict(environ)
    for flag, variable in (
        ("log_dir", "MALAUNCH_LOG_DIR"),
        ("report_file", "MALAUNCH_REPORT_FILE"),
        ("grace_period", "MALAUNCH_GRACE_PERIOD"),
    ):
        value = getattr(options, flag)
        if value is not None:
            merged[variable] = value
    return merged


def _say(message: str) -> None:
    sys.stderr.write(f"[{PROG}] {message}\n")
    sys.stderr.flush()


def _announce(plan: LaunchPlan) -> None:
    _say(
        f"method={plan.method} node_rank={plan.node_rank}/{plan.num_hosts} host={plan.host} "
        f"processes={len(plan.processes)} log_dir={plan.log_dir}"
    )
    for note in plan.notes:
        _say(note)


def _finish(plan: LaunchPlan, outcome: RestartOutcome) -> int:
    result = outcome.result
    problem = write_report(plan.report_file, {**report_json(result, plan), **restart_report(outcome)})
    if problem:
        _say(problem)
    if result.root_cause is not None or result.shim_signal is not None:
        sys.stderr.write(format_failure(result) + "\n")
    if outcome.classification is not None:
        kind = outcome.classification
        _say(f"failure class: {kind.kind} ({'retryable' if kind.retryable else 'not retryable'}): {kind.description}")
    _say(f"exit code {result.exit_code}; report: {plan.report_file}")
    return result.exit_code


def main(argv: Optional[Sequence[str]] = None, environ: Optional[Mapping[str, str]] = None) -> int:
    """Run the shim; returns the exit code (never raises for user errors)."""
    args: List[str] = list(sys.argv[1:] if argv is None else argv)
    env: Mapping[str, str] = os.environ if environ is None else environ
    options = build_parser().parse_args(args)
    try:
        cluster = parse_cluster_env(_overlay(env, options))
        policy, delay = parse_restart_policy(env), recovery_delay(env)
        inputs = gather_inputs(
            cluster,
            options.boot_file,
            options.args,
            env,
            cwd=os.getcwd(),
            progress=_say,
            dry_run=options.dry_run,
        )
        plan = plan_with_recovery(cluster, inputs, env)
        if options.dry_run:
            sys.stdout.write(plan_attempt(plan, 0, policy).render() + "\n")
            return 0
        _announce(plan)
        if is_recovery_plan(plan):
            outcome = run_recovery(plan, env, policy, delay, _say)
        else:
            outcome = run_with_restarts(plan, env, policy, run_plan, _say)
    except EntrypointError as error:
        sys.stderr.write(f"{PROG}: error: {error}\n")
        return exit_code_for(error)
    return _finish(plan, outcome)


def console_main() -> None:
    """Console-script entry point."""
    sys.exit(main())
