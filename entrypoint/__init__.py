"""malaunch.entrypoint: the in-container shim ``ma-entrypoint`` (standard library only).

Public names (``__all__`` is explicit and tested)::

    main                                   the shim: main(argv, environ) -> exit code
    ClusterEnv, parse_cluster_env          environment -> validated platform facts (pure)
    LaunchInputs, plan_launch              facts -> LaunchPlan (pure)
    LaunchPlan, ProcessSpec                the plan that --dry-run prints and the supervisor runs
    RankTable, parse_rank_table, ...       Ascend rank tables
    run_plan, RunResult, Failure           the supervisor and its result
    EntrypointError, ConfigError, ...      the exception tree (see malaunch.entrypoint.errors)
"""

from __future__ import annotations

from .cluster_env import ClusterEnv, parse_cluster_env
from .errors import ConfigError, EntrypointError, LaunchError, RankTableError, WaitTimeout
from .launchers import LaunchInputs, plan_launch
from .main import main
from .plan import LaunchPlan, ProcessSpec
from .rank_table import RankTable, parse_rank_table, read_rank_table, select_server, wait_for_rank_table
from .supervisor import Failure, RunResult, run_plan

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
