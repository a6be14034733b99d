"""Layer 4, the launchers: one module per launch method, each owning everything that method needs.

==================  ===================  =============================================================
method              module               what it starts
==================  ===================  =============================================================
``ranktable``       :mod:`.fanout`       one process per device of this host's server in the rank table
``single``          :mod:`.single`       the boot file once
``torchrun``        :mod:`.torchrun`     one torchrun per host (its stub, logs, summary, error files, gate)
``msrun``           :mod:`.msrun`        one msrun per host
msrun + recovery    :mod:`.msrun.recovery`  the scheduler and workers themselves, a failed one relaunched
==================  ===================  =============================================================

This registry is the only place that maps a method name to its launcher: :func:`launcher_for` (from the
shim's configuration, :class:`~..contract.config.ShimConfig`) and :func:`launcher_of` (from a plan). The
facades below (:func:`plan_launch`, :func:`plan_attempt`, :func:`gather_inputs`) are the shim's public entry
points that need a launcher (:func:`.running.run_plan` runs a plan with its launcher).
"""


from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Sequence, Type

from ..contract import VARIABLES
from ..contract.errors import ConfigError
from ..plan.prepare import gather
from ..run.launcher import Launcher
from .fanout import FanoutLauncher
from .msrun import MsrunLauncher
from .msrun.recovery import MsrunRecoveryLauncher
from .single import SingleLauncher
from .torchrun import TorchrunLauncher

if TYPE_CHECKING:
    from ..contract.cluster_env import ClusterEnv
    from ..contract.config import ShimConfig
    from ..plan.inputs import LaunchInputs, Needs
    from ..plan.launch_plan import LaunchPlan
    from ..plan.prepare import Progress, Resolver
    from ..run.policy import RestartPolicy

__all__ = [
    "gather_inputs",
    "launcher_for",
    "launcher_of",
    "method_launcher",
    "plan_attempt",
    "plan_launch",
    "resolve_method",
]

#: method -> its launcher's class.
_LAUNCHERS: Dict[str, Type[Launcher]] = {
    "ranktable": FanoutLauncher,
    "single": SingleLauncher,
    "torchrun": TorchrunLauncher,
    "msrun": MsrunLauncher,
}


def resolve_method(cluster: ClusterEnv) -> str:
    """The launch method: ``MA_RUN_METHOD``, or the platform default (rank table if one is given, else single)."""
    if cluster.method:
        return cluster.method
    return "ranktable" if cluster.rank_table_file else "single"


def method_launcher(cluster: ClusterEnv) -> Launcher:
    """The launcher of the cluster's method (MindSpore recovery aside: it needs the same inputs as msrun).

    Raises:
        ConfigError: an unknown method.
    """
    method = resolve_method(cluster)
    if method not in _LAUNCHERS:
        raise ConfigError("MA_RUN_METHOD", method, f"expected {', '.join(VARIABLES['MA_RUN_METHOD'].choices)}")
    launcher: Launcher = _LAUNCHERS[method]()
    return launcher


def launcher_for(config: ShimConfig) -> Launcher:
    """The launcher that plans and runs this host's job: the method's, or MindSpore recovery's.

    Raises:
        ConfigError: an unknown method.
    """
    launcher = method_launcher(config.cluster)
    if launcher.method == "msrun" and config.recovery.enabled:
        return _recovery(config)
    return launcher


def _recovery(config: Optional[ShimConfig]) -> Launcher:
    if config is None:
        return MsrunRecoveryLauncher()
    return MsrunRecoveryLauncher(config.policy, config.recovery.delay, config.recovery.path)


def launcher_of(plan: LaunchPlan, config: Optional[ShimConfig] = None) -> Launcher:
    """The launcher a plan belongs to (``config``: MindSpore recovery's policy; None: the defaults).

    Raises:
        ValueError: no launcher owns the plan (a plan made by hand with an unknown method).
    """
    if plan.method in _LAUNCHERS:
        launcher: Launcher = _LAUNCHERS[plan.method]()
        if launcher.owns(plan):
            return launcher
        if plan.method == "msrun":
            return _recovery(config)
    raise ValueError(f"no launcher runs method {plan.method!r} with log source {plan.log_source!r}")


def plan_launch(cluster: ClusterEnv, inputs: LaunchInputs) -> LaunchPlan:
    """The method's plan for this host (without MindSpore recovery). Pure.

    Raises:
        ConfigError: the method cannot run with these inputs (e.g. a rank table without devices for this host).
    """
    return method_launcher(cluster).plan(cluster, inputs)


def plan_attempt(plan: LaunchPlan, attempt: int, policy: RestartPolicy) -> LaunchPlan:
    """Attempt ``attempt``'s plan (0-based), as the plan's launcher makes it. Pure."""
    return launcher_of(plan).plan_attempt(plan, attempt, policy)


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

    launcher = method_launcher(config.cluster)
    needs: Needs = launcher.needs(config.cluster)
    return gather(config.cluster, launcher.method, needs, boot_file, boot_args, config.path, cwd=cwd,
                  progress=progress, resolve=resolve, dry_run=dry_run)  # fmt: skip
