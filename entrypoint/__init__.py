"""malaunch.entrypoint: the in-container shim ``ma-entrypoint`` (standard library only).

Public names (``__all__`` is explicit and tested)::

    main                                   the shim: main(argv, environ) -> exit code
    ClusterEnv, parse_cluster_env          environment -> validated platform facts (pure)
    LaunchInputs, plan_launch              facts -> LaunchPlan (pure)
    LaunchPlan, ProcessSpec                the plan that --dry-run prints and the supervisor runs
    RankTable, parse_rank_table, ...       Ascend rank tables
    run_plan, RunResult, Failure           the supervisor and its result
    EntrypointError, ConfigError, ...      the exception tree (see malaunch.entrypoint.contract.errors)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_names
from .main import main  # eager: the submodule of the same name must not shadow the function

if TYPE_CHECKING:
    from .contract.cluster_env import ClusterEnv, parse_cluster_env
    from .contract.errors import ConfigError, EntrypointError, LaunchError, RankTableError, WaitTimeout
    from .launchers import plan_launch, run_plan
    from .plan.inputs import LaunchInputs
    from .plan.launch_plan import LaunchPlan, ProcessSpec
    from .plan.rank_table import RankTable, parse_rank_table, read_rank_table, select_server, wait_for_rank_table
    from .report.report import Failure, RunResult

#: Where each public name lives. Each is imported on first use: the shim's start-up imports only what it runs
#: (``python -m malaunch.entrypoint`` needs ``main``), and importing the package never needs Linux (the
#: supervisor does).
_HOMES = {
    "ClusterEnv": "contract.cluster_env",
    "parse_cluster_env": "contract.cluster_env",
    "ConfigError": "contract.errors",
    "EntrypointError": "contract.errors",
    "LaunchError": "contract.errors",
    "RankTableError": "contract.errors",
    "WaitTimeout": "contract.errors",
    "LaunchInputs": "plan.inputs",
    "plan_launch": "launchers",
    "LaunchPlan": "plan.launch_plan",
    "ProcessSpec": "plan.launch_plan",
    "RankTable": "plan.rank_table",
    "parse_rank_table": "plan.rank_table",
    "read_rank_table": "plan.rank_table",
    "select_server": "plan.rank_table",
    "wait_for_rank_table": "plan.rank_table",
    "Failure": "report.report",
    "RunResult": "report.report",
    "run_plan": "launchers",
}


__getattr__, __dir__ = lazy_names(__name__, __name__, _HOMES, globals())


__all__ = [
    "ClusterEnv",
    "ConfigError",
    "EntrypointError",
    "Failure",
    "LaunchError",
    "LaunchInputs",
    "LaunchPlan",
    "ProcessSpec",
    "RankTable",
    "RankTableError",
    "RunResult",
    "WaitTimeout",
    "main",
    "parse_cluster_env",
    "parse_rank_table",
    "plan_launch",
    "read_rank_table",
    "run_plan",
    "select_server",
    "wait_for_rank_table",
]
