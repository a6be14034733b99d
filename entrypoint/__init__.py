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

from typing import TYPE_CHECKING, Any

from .cluster_env import ClusterEnv, parse_cluster_env
from .errors import ConfigError, EntrypointError, LaunchError, RankTableError, WaitTimeout
from .launchers import LaunchInputs, plan_launch
from .main import main
from .plan import LaunchPlan, ProcessSpec
from .rank_table import RankTable, parse_rank_table, read_rank_table, select_server, wait_for_rank_table

if TYPE_CHECKING:
    from .supervisor import Failure, RunResult, run_plan

_LAZY = ("Failure", "RunResult", "run_plan")  # the supervisor needs Linux; importing the package must not


def __getattr__(name: str) -> Any:
    """The supervisor's names, imported on first use (so ``main`` can refuse a non-Linux host with one line)."""
    if name in _LAZY:
        from . import supervisor

        return getattr(supervisor, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

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
