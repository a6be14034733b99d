"""MindSpore dynamic-networking recovery: the shim starts the scheduler and the workers itself (its planning).

With ``MA_RUN_METHOD=msrun`` and ``MS_ENABLE_RECOVERY=1`` the shim does not start msrun (msrun kills every
worker when one fails). It plans what msrun would start, one process each, with the variables msrun would set:

- on the master host (``VC_TASK_INDEX=0``) the scheduler: ``MS_ROLE=MS_SCHED``;
- on every host ``MA_NUM_GPUS`` workers (at least one): ``MS_ROLE=MS_WORKER``, ``MS_NODE_ID`` = ``RANK_ID`` =
  ``node_rank * G + i``, ``DEVICE_ID=i``;
- all of them: ``MS_SCHED_HOST`` (the master's IP), ``MS_SCHED_PORT`` (``MA_MSRUN_MASTER_PORT``),
  ``MS_WORKER_NUM``, ``RANK_SIZE``, ``MS_TOPO_TIMEOUT`` (``MSRUN_CLUSTER_TIME_OUT``), ``MS_ENABLE_RECOVERY=1``
  and ``MS_RECOVERY_PATH`` (the job's value, else ``<log dir>/ms_recovery``), the same in every relaunch.

:func:`relaunch_spec` is the relaunch of one process: the same variables (the scheduler gets
``MS_NODE_ID=sched``, as MindSpore's recovery guide does), a log file of its own. The run is the supervisor's
like any other, with one hook of :class:`MsrunRecoveryLauncher`: a failed process whose class ``restart_on``
accepts, while fewer than the budget of relaunches were made on this host (``MA_MAX_RESTARTS``, else
:data:`DEFAULT_RELAUNCHES`), is started again alone after ``MALAUNCH_MS_RECOVERY_DELAY`` seconds (default 30: the
scheduler refuses a reused node id until it has timed the old one out) while the others keep running; any other
failure ends the job as usual. Each relaunched failure is an attempt of its own in the report.
"""


from __future__ import annotations

import os
from typing import Dict, List, Optional

from ...contract.cluster_env import ClusterEnv
from ...contract.config import DEFAULT_RECOVERY_DELAY, RestartPolicy
from ...plan.build import boot_command
from ...plan.inputs import LaunchInputs, Needs
from ...plan.launch_plan import LaunchPlan, ProcessSpec
from ...run.launcher import Launcher
from . import MsrunLauncher, python_path

__all__ = [
    "DEFAULT_RECOVERY_DELAY",
    "DEFAULT_RELAUNCHES",
    "SCHEDULER_NAME",
    "MsrunRecoveryPlanner",
    "plan_with_recovery",
    "relaunch_number",
    "relaunch_spec",
]

METHOD = "msrun"
#: Relaunches per host when ``MA_MAX_RESTARTS`` is unset: MS_ENABLE_RECOVERY=1 asks for relaunches.
DEFAULT_RELAUNCHES = 3
SCHEDULER_NAME = "ms-scheduler"


def plan_with_recovery(cluster: ClusterEnv, inputs: LaunchInputs, recovery_path: Optional[str] = None) -> LaunchPlan:
    """The recovery plan: scheduler and workers (``recovery_path``: ``MS_RECOVERY_PATH``, None for
    ``<log dir>/ms_recovery``). Pure. Whether recovery is wanted is the contract's to say
    (:attr:`~...contract.config.ShimConfig.recovery`)."""
    plan = MsrunLauncher().plan(cluster, inputs)
    if inputs.master_ip is None or inputs.python_dir is None:
        raise ValueError("msrun recovery planning needs master_ip and python_dir resolved by main")
    per_host = cluster.procs_per_host
    total = cluster.num_hosts * per_host
    log_dir = plan.log_dir
    recovery_path = recovery_path or os.path.join(log_dir, "ms_recovery")
    common = {
        "MS_SCHED_HOST": inputs.master_ip,
        "MS_SCHED_PORT": str(cluster.msrun_master_port),
        "MS_WORKER_NUM": str(total),
        "RANK_SIZE": str(total),
        "MS_TOPO_TIMEOUT": str(cluster.msrun_cluster_time_out),
        "MS_ENABLE_RECOVERY": "1",
        "MS_RECOVERY_PATH": recovery_path,
        "PATH": python_path(inputs),
        "PYTHONUNBUFFERED": "1",
    }
    argv = boot_command(inputs)
    processes: List[ProcessSpec] = []
    if cluster.node_rank == 0:
        processes.append(
            ProcessSpec(
                name=SCHEDULER_NAME,
                argv=argv,
                env={**common, "MS_ROLE": "MS_SCHED", "RANK_ID": "0"},
                cwd=None,
                log_file=os.path.join(log_dir, "scheduler.log"),
            )
        )
    rank_logs: Dict[int, str] = {}
    for local in range(per_host):
        node_id = cluster.node_rank * per_host + local
        log_file = os.path.join(log_dir, f"worker_{node_id}.log")
        rank_logs[node_id] = log_file
        env = {**common, "MS_ROLE": "MS_WORKER", "MS_NODE_ID": str(node_id), "RANK_ID": str(node_id)}
        env["DEVICE_ID"] = str(local)
        processes.append(
            ProcessSpec(f"ms-worker-{node_id}", argv, env, None, log_file, rank=node_id, local_rank=local)
        )
    notes = (
        "MindSpore recovery (MS_ENABLE_RECOVERY=1): the shim starts the scheduler and workers itself and "
        f"relaunches a failed one with its MS_NODE_ID after MALAUNCH_MS_RECOVERY_DELAY s; MS_RECOVERY_PATH="
        f"{recovery_path}",
    )
    return plan._replace(
        processes=tuple(processes),
        log_source="pipe",
        rank_logs=rank_logs,
        notes=inputs.notes + notes,
        files={},
        watch_workers=False,
        births=None,  # the shim starts each process itself: no msrun, no birth records
    )


def relaunch_spec(spec: ProcessSpec, relaunch: int) -> ProcessSpec:
    """Relaunch number ``relaunch`` (1-based) of ``spec``: same variables, its own log file. Pure."""
    stem, ext = os.path.splitext(spec.log_file)
    env = dict(spec.env)
    if env.get("MS_ROLE") == "MS_SCHED":
        env["MS_NODE_ID"] = "sched"
    return spec._replace(env=env, log_file=f"{stem}.relaunch-{relaunch}{ext or '.log'}")


def relaunch_number(spec: ProcessSpec) -> int:
    """Which relaunch ``spec`` is (0: the first start), from its log file's name."""
    stem = os.path.splitext(spec.log_file)[0]
    number = stem.rsplit(".relaunch-", 1)[1] if ".relaunch-" in stem else "0"
    return int(number) if number.isdigit() else 0


class MsrunRecoveryPlanner(Launcher):
    """MindSpore recovery's planning hooks (its relaunches: :class:`.recovery.MsrunRecoveryLauncher`)."""

    method = METHOD
    relaunches = True

    def __init__(
        self,
        policy: Optional[RestartPolicy] = None,
        delay: float = DEFAULT_RECOVERY_DELAY,
        recovery_path: Optional[str] = None,
    ) -> None:
        policy = policy if policy is not None else RestartPolicy()
        self.policy, self.delay, self.recovery_path = policy, delay, recovery_path
        self.budget = policy.max_restarts if policy.max_restarts > 0 else DEFAULT_RELAUNCHES

    def needs(self, cluster: ClusterEnv) -> Needs:
        return MsrunLauncher().needs(cluster)

    def plan(self, cluster: ClusterEnv, inputs: LaunchInputs) -> LaunchPlan:
        return plan_with_recovery(cluster, inputs, self.recovery_path)

    def owns(self, plan: LaunchPlan) -> bool:
        return plan.method == METHOD and plan.log_source == "pipe"

    def plan_attempt(self, plan: LaunchPlan, attempt: int, policy: RestartPolicy) -> LaunchPlan:
        return plan  # recovery relaunches single processes instead

    def attempt_limit(self, plan: LaunchPlan, policy: RestartPolicy) -> int:
        return 1

    def announces_attempts(self, policy: RestartPolicy) -> bool:
        return False

    def failure_name(self, spec: ProcessSpec, rank: Optional[int]) -> str:
        return f"rank-{rank}" if rank is not None else spec.name
