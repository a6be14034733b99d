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

import importlib
from typing import TYPE_CHECKING, Any, List

from .main import main  # eager: the submodule of the same name must not shadow the function

if TYPE_CHECKING:
    from .cluster_env import ClusterEnv, parse_cluster_env
    from .errors import ConfigError, EntrypointError, LaunchError, RankTableError, WaitTimeout
    from .launchers import LaunchInputs, plan_launch
    from .plan import LaunchPlan, ProcessSpec
    from .rank_table import RankTable, parse_rank_table, read_rank_table, select_server, wait_for_rank_table
    from .supervisor import Failure, RunResult, run_plan

#: Where each public name lives. Each is imported on first use: the shim's start-up imports only what it runs
#: (``python -m malaunch.entrypoint`` needs ``main``), and importing the package never needs Linux (the
#: supervisor does).
_HOMES = {
    "ClusterEnv": "cluster_env",
    "parse_cluster_env": "cluster_env",
    "ConfigError": "errors",
    "EntrypointError": "errors",
    "LaunchError": "errors",
    "RankTableError": "errors",
    "WaitTimeout": "errors",
    "LaunchInputs": "launchers",
    "plan_launch": "launchers",
    "LaunchPlan": "plan",
    "ProcessSpec": "plan",
    "RankTable": "rank_table",
    "parse_rank_table": "rank_table",
    "read_rank_table": "rank_table",
    "select_server": "rank_table",
    "wait_for_rank_table": "rank_table",
    "Failure": "supervisor",
    "RunResult": "supervisor",
    "run_plan": "supervisor",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_HOMES))


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
