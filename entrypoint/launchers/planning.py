"""The planning registry: each launch method's planner (the :class:`~..run.launcher.Launcher` hooks that plan), and
the facades the shim's planning phase (:mod:`...start`) uses. Imports no run hook's module: see :mod:`.running` for
the whole launchers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Sequence, Type

from ..contract import VARIABLES
from ..contract.errors import ConfigError
from ..plan.prepare import gather
from ..run.launcher import Launcher
from .fanout import FanoutLauncher
from .msrun import MsrunLauncher
from .msrun.recovery_plan import MsrunRecoveryPlanner
from .single import SingleLauncher
from .torchrun.plan import TorchrunPlanner

if TYPE_CHECKING:
    from ..contract.cluster_env import ClusterEnv
    from ..contract.config import RestartPolicy, ShimConfig
    from ..plan.inputs import LaunchInputs, Needs
    from ..plan.launch_plan import LaunchPlan
    from ..plan.prepare import Progress, Resolver

__all__ = [
    "METHODS",
    "checked_method",
    "gather_inputs",
    "method_planner",
    "plan_attempt",
    "plan_launch",
    "planner_for",
    "planner_of",
    "resolve_method",
]

#: method -> its planner's class (a launcher whose run hooks are light is its own planner).
METHODS: Dict[str, Type[Launcher]] = {
    "ranktable": FanoutLauncher,
    "single": SingleLauncher,
    "torchrun": TorchrunPlanner,
    "msrun": MsrunLauncher,
}


def resolve_method(cluster: ClusterEnv) -> str:
    """The launch method: ``MA_RUN_METHOD``, or the platform default (rank table if one is given, else single)."""
    if cluster.method:
        return cluster.method
    return "ranktable" if cluster.rank_table_file else "single"


def checked_method(cluster: ClusterEnv) -> str:
    """The cluster's method, one of :data:`METHODS`.

    Raises:
        ConfigError: an unknown method.
    """
    method = resolve_method(cluster)
    if method not in METHODS:
        raise ConfigError("MA_RUN_METHOD", method, f"expected {', '.join(VARIABLES['MA_RUN_METHOD'].choices)}")
    return method


def method_planner(cluster: ClusterEnv) -> Launcher:
    """The planner of the cluster's method (MindSpore recovery aside: it needs the same inputs as msrun).

    Raises:
        ConfigError: an unknown method.
    """
    planner: Launcher = METHODS[checked_method(cluster)]()
    return planner


def planner_for(config: ShimConfig) -> Launcher:
    """The planner of this host's job: the method's, or MindSpore recovery's.

    Raises:
        ConfigError: an unknown method.
    """
    planner = method_planner(config.cluster)
    if planner.method == "msrun" and config.recovery.enabled:
        return MsrunRecoveryPlanner(config.policy, config.recovery.delay, config.recovery.path)
    return planner


def planner_of(plan: LaunchPlan) -> Launcher:
    """The planner a plan belongs to (MindSpore recovery's with the defaults).

    Raises:
        ValueError: no launcher owns the plan (a plan made by hand with an unknown method).
    """
    if plan.method in METHODS:
        planner: Launcher = METHODS[plan.method]()
        if planner.owns(plan):
            return planner
        if plan.method == "msrun":
            return MsrunRecoveryPlanner()
    raise ValueError(f"no launcher runs method {plan.method!r} with log source {plan.log_source!r}")


def plan_launch(cluster: ClusterEnv, inputs: LaunchInputs) -> LaunchPlan:
    """The method's plan for this host (without MindSpore recovery). Pure.

    Raises:
        ConfigError: the method cannot run with these inputs (e.g. a rank table without devices for this host).
    """
    return method_planner(cluster).plan(cluster, inputs)


def plan_attempt(plan: LaunchPlan, attempt: int, policy: RestartPolicy) -> LaunchPlan:
    """Attempt ``attempt``'s plan (0-based), as the plan's launcher makes it. Pure."""
    return planner_of(plan).plan_attempt(plan, attempt, policy)


def gather_inputs(
    config: ShimConfig,
    boot_file: str,
    boot_args: Sequence[str],
    *,
    cwd: str,
    progress: Optional[Progress] = None,
    resolve: Optional[Resolver] = None,
    dry_run: bool = False,
) -> LaunchInputs:
    """What the method's launcher needs gathered before it plans (:func:`..plan.prepare.gather`)."""
    planner = method_planner(config.cluster)
    needs: Needs = planner.needs(config.cluster)
    return gather(config.cluster, planner.method, needs, boot_file, boot_args, config.path, cwd=cwd,
                  progress=progress, resolve=resolve, dry_run=dry_run)  # fmt: skip
