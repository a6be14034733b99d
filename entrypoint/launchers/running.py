"""The running registry: each launch method's whole launcher (its planner and the run's hooks), and a plan run once
with its launcher (the supervisor). The run phase's; the planning phase uses :mod:`.planning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, BinaryIO, Dict, Mapping, Optional, Type

from ..run.launcher import Launcher
from ..run.supervisor import run_plan as supervise
from .fanout import FanoutLauncher
from .msrun import MsrunLauncher
from .msrun.recovery import MsrunRecoveryLauncher
from .planning import checked_method
from .single import SingleLauncher
from .torchrun.launcher import TorchrunLauncher

if TYPE_CHECKING:
    from ..contract.cluster_env import ClusterEnv
    from ..contract.config import ShimConfig
    from ..plan.launch_plan import LaunchPlan
    from ..report.report import RunResult

__all__ = ["LAUNCHERS", "launcher_for", "launcher_of", "method_launcher", "run_plan"]

#: method -> its launcher's class.
LAUNCHERS: Dict[str, Type[Launcher]] = {
    "ranktable": FanoutLauncher,
    "single": SingleLauncher,
    "torchrun": TorchrunLauncher,
    "msrun": MsrunLauncher,
}


def method_launcher(cluster: ClusterEnv) -> Launcher:
    """The launcher of the cluster's method (MindSpore recovery aside: it needs the same inputs as msrun).

    Raises:
        ConfigError: an unknown method.
    """
    launcher: Launcher = LAUNCHERS[checked_method(cluster)]()
    return launcher


def _recovery(config: Optional[ShimConfig]) -> Launcher:
    if config is None:
        return MsrunRecoveryLauncher()
    return MsrunRecoveryLauncher(config.policy, config.recovery.delay, config.recovery.path)


def launcher_for(config: ShimConfig) -> Launcher:
    """The launcher that plans and runs this host's job: the method's, or MindSpore recovery's.

    Raises:
        ConfigError: an unknown method.
    """
    launcher = method_launcher(config.cluster)
    if launcher.method == "msrun" and config.recovery.enabled:
        return _recovery(config)
    return launcher


def launcher_of(plan: LaunchPlan, config: Optional[ShimConfig] = None) -> Launcher:
    """The launcher a plan belongs to (``config``: MindSpore recovery's policy; None: the defaults).

    Raises:
        ValueError: no launcher owns the plan (a plan made by hand with an unknown method).
    """
    if plan.method in LAUNCHERS:
        launcher: Launcher = LAUNCHERS[plan.method]()
        if launcher.owns(plan):
            return launcher
        if plan.method == "msrun":
            return _recovery(config)
    raise ValueError(f"no launcher runs method {plan.method!r} with log source {plan.log_source!r}")


def run_plan(
    plan: LaunchPlan,
    base_env: Mapping[str, str],
    *,
    console_out: Optional[BinaryIO] = None,
    console_err: Optional[BinaryIO] = None,
    handle_signals: bool = True,
    config: Optional[ShimConfig] = None,
) -> RunResult:
    """Run ``plan`` once with its launcher (:func:`..run.supervisor.run_plan`); ``base_env`` is the processes'
    environment, passed on as data (``config``: MindSpore recovery's policy for a recovery plan)."""
    return supervise(plan, base_env, launcher_of(plan, config), console_out=console_out,
                     console_err=console_err, handle_signals=handle_signals)  # fmt: skip
