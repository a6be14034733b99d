"""A bound, not a launcher: the least time to the last rank a shim can reach that plans with the shim's own code.

``plan_then_fork.py BOOT_FILE [ARGS...]``, in the environment the bench gives the shim (a rank table and its
method). It does what the shim must do before its first fork and nothing else: it begins the job's guards (the
watchdog, the job's cgroup: :class:`EarlyGuards`), reads the environment and plans with the shim's own planning
modules, then starts every rank of attempt 0 with its output to its log file. Only then does it import the run
phase (the supervisor, the output pumps, the attempt loop, the report: what supervising the ranks needs), so that
its CPU competes with the ranks' start as it would in a shim ordered that way; then it waits for the ranks.

No rank's output is pumped, no failure is watched and nothing is reported: a shim that did this would not be the
shim. Its figures say how far any reordering of the run phase's work could bring the start-up, so the bench can
tell a budget that plain code cannot meet from one it has not yet met (docs/performance.md, "Ninth round").
"""

from __future__ import annotations

import gc

gc.disable()  # as the shim's entry script: the modules' objects live as long as the process

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from typing import Dict, List  # noqa: E402

from malaunch.entrypoint import start  # noqa: E402
from malaunch.entrypoint.contract.config import parse_shim_config  # noqa: E402
from malaunch.entrypoint.launchers.planning import gather_inputs, planner_for  # noqa: E402
from malaunch.entrypoint.plan.resolve import resolve_ipv4  # noqa: E402
from malaunch.entrypoint.run.procs.guards import EarlyGuards  # noqa: E402


def _rank_env(environ: Dict[str, str], variables: Dict[str, str], defaults: Dict[str, str]) -> Dict[str, str]:
    merged = {**defaults, **environ}
    merged.update(variables)
    return merged


def main() -> int:
    environ = dict(start.process_environment())
    guards = EarlyGuards.begin(environ)
    try:
        config = parse_shim_config(environ)
        inputs = gather_inputs(config, sys.argv[1], sys.argv[2:], cwd=os.getcwd(), progress=start.say,
                               resolve=resolve_ipv4)  # fmt: skip
        planner = planner_for(config)
        attempt = planner.plan_attempt(planner.plan(config.cluster, inputs), 0, config.policy)
        os.makedirs(attempt.log_dir, exist_ok=True)
        ranks: List[subprocess.Popen[bytes]] = []
        for spec in attempt.processes:
            with open(spec.log_file, "ab") as log:
                ranks.append(subprocess.Popen(
                    list(spec.argv), env=_rank_env(environ, dict(spec.env), dict(spec.env_defaults)), cwd=spec.cwd,
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                ))  # fmt: skip
        import malaunch.entrypoint.runphase  # noqa: F401  (its CPU after the first fork: see the docstring)

        gc.freeze()
        gc.enable()
        return max(rank.wait() for rank in ranks)
    finally:
        guards.abandon()


if __name__ == "__main__":
    sys.exit(main())
