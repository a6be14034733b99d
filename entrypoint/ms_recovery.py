"""MindSpore dynamic-networking recovery: the shim starts the scheduler and the workers itself (pure planning).

With ``MA_RUN_METHOD=msrun`` and ``MS_ENABLE_RECOVERY=1`` the shim does not start msrun (msrun kills every
worker when one fails). It plans what msrun would start, one process each, with the variables msrun would set:

- on the master host (``VC_TASK_INDEX=0``) the scheduler: ``MS_ROLE=MS_SCHED``;
- on every host ``MA_NUM_GPUS`` workers (at least one): ``MS_ROLE=MS_WORKER``, ``MS_NODE_ID`` = ``RANK_ID`` =
  ``node_rank * G + i``, ``DEVICE_ID=i``;
- all of them: ``MS_SCHED_HOST`` (the master's IP), ``MS_SCHED_PORT`` (``MA_MSRUN_MASTER_PORT``),
  ``MS_WORKER_NUM``, ``RANK_SIZE``, ``MS_TOPO_TIMEOUT`` (``MSRUN_CLUSTER_TIME_OUT``), ``MS_ENABLE_RECOVERY=1``
  and ``MS_RECOVERY_PATH`` (the job's value, else ``<log dir>/ms_recovery``), the same in every relaunch.

:func:`relaunch_spec` is the relaunch of one process: the same variables (the scheduler gets
``MS_NODE_ID=sched``, as MindSpore's recovery guide does), a log file of its own. The execution is in
:mod:`._recovery_run`: each process runs under its own ``run_plan`` and a failed one is started again after
``MALAUNCH_MS_RECOVERY_DELAY`` seconds (default 30: the scheduler refuses a reused node id until it has timed
the old one out).
"""

from __future__ import annotations

import os
from typing import Dict, List, Mapping

from .cluster_env import ClusterEnv
from .contract import VARIABLES, parse_bool, parse_seconds, raw_value
from .launchers import LaunchInputs, boot_command, plan_launch
from .plan import LaunchPlan, ProcessSpec

__all__ = [
    "DEFAULT_RECOVERY_DELAY",
    "SCHEDULER_NAME",
    "is_recovery_plan",
    "plan_with_recovery",
    "recovery_delay",
    "recovery_wanted",
    "relaunch_spec",
]

DEFAULT_RECOVERY_DELAY = float(VARIABLES["MALAUNCH_MS_RECOVERY_DELAY"].default or 0.0)
SCHEDULER_NAME = "ms-scheduler"


def recovery_wanted(cluster: ClusterEnv, environ: Mapping[str, str]) -> bool:
    """True for ``MA_RUN_METHOD=msrun`` with ``MS_ENABLE_RECOVERY`` true (1, true, yes, on).

    Raises:
        ConfigError: with msrun, ``MS_ENABLE_RECOVERY`` is neither true nor false (e.g. ``maybe``).
    """
    return cluster.method == "msrun" and parse_bool(environ, "MS_ENABLE_RECOVERY")


def recovery_delay(environ: Mapping[str, str]) -> float:
    """``MALAUNCH_MS_RECOVERY_DELAY``: seconds between a process's failure and its relaunch.

    Raises:
        ConfigError: not seconds between 0 and 3600 in ASCII digits (the contract's rule: no ``1e3``, no
            full-width digits).
    """
    return parse_seconds(environ, "MALAUNCH_MS_RECOVERY_DELAY")


def is_recovery_plan(plan: LaunchPlan) -> bool:
    """A plan from :func:`plan_with_recovery` (msrun's method, but one process per rank)."""
    return plan.method == "msrun" and plan.log_source == "pipe"


def plan_with_recovery(cluster: ClusterEnv, inputs: LaunchInputs, environ: Mapping[str, str]) -> LaunchPlan:
    """The launch plan: :func:`~malaunch.entrypoint.launchers.plan_launch`'s, or the recovery plan. Pure."""
    plan = plan_launch(cluster, inputs)
    if not recovery_wanted(cluster, environ):
        return plan
    if inputs.master_ip is None or inputs.python_dir is None:
        raise ValueError("msrun recovery planning needs master_ip and python_dir resolved by main")
    per_host = cluster.procs_per_host
    total = cluster.num_hosts * per_host
    log_dir = plan.log_dir
    recovery_path = raw_value(environ, "MS_RECOVERY_PATH") or os.path.join(log_dir, "ms_recovery")
    path = f"{inputs.python_dir}{os.pathsep}{inputs.path_env}" if inputs.path_env else inputs.python_dir
    common = {
        "MS_SCHED_HOST": inputs.master_ip,
        "MS_SCHED_PORT": str(cluster.msrun_master_port),
        "MS_WORKER_NUM": str(total),
        "RANK_SIZE": str(total),
        "MS_TOPO_TIMEOUT": str(cluster.msrun_cluster_time_out),
        "MS_ENABLE_RECOVERY": "1",
        "MS_RECOVERY_PATH": recovery_path,
        "PATH": path,
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
        notes=plan.notes + notes,
        files={},
        watch_workers=False,
    )


def relaunch_spec(spec: ProcessSpec, relaunch: int) -> ProcessSpec:
    """Relaunch number ``relaunch`` (1-based) of ``spec``: same variables, its own log file. Pure."""
    stem, ext = os.path.splitext(spec.log_file)
    env = dict(spec.env)
    if env.get("MS_ROLE") == "MS_SCHED":
        env["MS_NODE_ID"] = "sched"
    return spec._replace(env=env, log_file=f"{stem}.relaunch-{relaunch}{ext or '.log'}")
