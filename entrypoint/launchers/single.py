"""A single run (no ``MA_RUN_METHOD``, no rank table): the boot file once, as one process (``boot``)."""


from __future__ import annotations

import os.path

from ..contract.cluster_env import ClusterEnv
from ..plan.build import boot_command, log_dir_of, make_plan
from ..plan.inputs import LaunchInputs
from ..plan.launch_plan import LaunchPlan, ProcessSpec
from ..run.launcher import Launcher

__all__ = ["SingleLauncher", "plan_single"]

METHOD = "single"


def plan_single(cluster: ClusterEnv, inputs: LaunchInputs, log_dir: str) -> LaunchPlan:
    """The one process's plan. Pure."""
    log_file = os.path.join(log_dir, "boot.log")
    proc = ProcessSpec(name="boot", argv=boot_command(inputs), env={}, cwd=None, log_file=log_file)
    return make_plan(METHOD, cluster, inputs, log_dir, [proc], "pipe", {})


class SingleLauncher(Launcher):
    """The single run's hooks: all defaults."""

    method = METHOD

    def plan(self, cluster: ClusterEnv, inputs: LaunchInputs) -> LaunchPlan:
        return plan_single(cluster, inputs, log_dir_of(cluster, inputs))
