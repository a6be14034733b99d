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
from typing import Any, Dict, List, Mapping, Optional

from .cluster_env import ClusterEnv
from .contract import parse_bool
from .errors import ConfigError
from .launchers import LaunchInputs, boot_command, plan_launch
from .plan import LaunchPlan, ProcessSpec

__all__ = [
    "DEFAULT_RECOVERY_DELAY",
    "SCHEDULER_NAME",
    "is_recovery_plan",
    "plan_from_json",
    "plan_with_recovery",
    "recovery_delay",
    "recovery_wanted",
    "relaunch_spec",
]

DEFAULT_RECOVERY_DELAY = 30.0
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
        ConfigError: not a number of seconds between 0 and 3600.
    """
    raw = (environ.get("MALAUNCH_MS_RECOVERY_DELAY") or "").strip()
    if not raw:
        return DEFAULT_RECOVERY_DELAY
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError("MALAUNCH_MS_RECOVERY_DELAY", raw, "expected a number of seconds, e.g. 30") from None
    if not 0 <= value <= 3600:
        raise ConfigError("MALAUNCH_MS_RECOVERY_DELAY", raw, "expected seconds between 0 and 3600")
    return value


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
    recovery_path = (environ.get("MS_RECOVERY_PATH") or "").strip() or os.path.join(log_dir, "ms_recovery")
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


def plan_from_json(data: Mapping[str, Any]) -> LaunchPlan:
    """Inverse of :meth:`LaunchPlan.to_json` (a recovery unit reads its one-process plan from a file)."""

    def _optional_int(value: Any) -> Optional[int]:
        return None if value is None else int(value)

    processes = tuple(
        ProcessSpec(
            name=str(item["name"]),
            argv=tuple(str(arg) for arg in item["argv"]),
            env={str(k): str(v) for k, v in item["env"].items()},
            cwd=None if item.get("cwd") is None else str(item["cwd"]),
            log_file=str(item["log_file"]),
            rank=_optional_int(item.get("rank")),
            local_rank=_optional_int(item.get("local_rank")),
        )
        for item in data["processes"]
    )
    return LaunchPlan(
        method=str(data["method"]),
        node_rank=int(data["node_rank"]),
        num_hosts=int(data["num_hosts"]),
        host=str(data["host"]),
        processes=processes,
        log_source=str(data["log_source"]),
        log_dir=str(data["log_dir"]),
        rank_logs={int(k): str(v) for k, v in data["rank_logs"].items()},
        grace_period=float(data["grace_period"]),
        report_file=str(data["report_file"]),
        notes=tuple(str(n) for n in data.get("notes", ())),
        files={str(k): str(v) for k, v in data.get("files", {}).items()},
        watch_workers=bool(data.get("watch_workers", False)),
    )
