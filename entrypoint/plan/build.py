"""The pieces every launcher's plan is made of: the boot command, flag merging, log folder, host, and the
:class:`~.launch_plan.LaunchPlan` itself from a launcher's processes. Pure: no environment, clock or disk."""


from __future__ import annotations

import os.path
from typing import Dict, List, Optional, Sequence, Tuple

from ..contract.cluster_env import ClusterEnv
from .inputs import LaunchInputs
from .launch_plan import LaunchPlan, ProcessSpec

__all__ = ["boot_command", "flag_name", "flag_value", "log_dir_of", "make_plan", "merge_flags", "node_ranks"]


def flag_name(token: str) -> Optional[str]:
    """Normalised name of a ``--flag`` / ``--flag=value`` token (``--a-b`` and ``--a_b`` are the same), else None."""
    if not token.startswith("--") or token == "--":
        return None
    return token[2:].split("=", 1)[0].replace("-", "_")


def merge_flags(presets: Sequence[str], extra: Sequence[str]) -> List[str]:
    """Presets followed by ``extra``; a preset whose flag name appears in ``extra`` is dropped.

    Presets are always single ``--name=value`` or ``--name`` tokens, so dropping one never orphans a value.
    """
    overridden = {name for name in (flag_name(tok) for tok in extra) if name is not None}
    return [tok for tok in presets if flag_name(tok) not in overridden] + list(extra)


def flag_value(tokens: Sequence[str], name: str) -> Optional[str]:
    """The value given to ``--name`` (either spelling, ``=v`` or `` v``) in ``tokens``; the last one wins."""
    value = None
    for index, token in enumerate(tokens):
        if flag_name(token) == name:
            if "=" in token:
                value = token.split("=", 1)[1]
            elif index + 1 < len(tokens):
                value = tokens[index + 1]
    return value


def boot_command(inputs: LaunchInputs) -> Tuple[str, ...]:
    """argv that runs the boot file once: Python files with ``-u`` (unbuffered), ``.sh`` with bash, else exec."""
    boot = inputs.boot_file
    if boot.endswith(".py"):
        return (inputs.interpreter, "-u", boot, *inputs.boot_args)
    if boot.endswith(".sh"):
        return ("bash", boot, *inputs.boot_args)
    return (boot, *inputs.boot_args)


def log_dir_of(cluster: ClusterEnv, inputs: LaunchInputs) -> str:
    """This host's log folder: ``MALAUNCH_LOG_DIR``, else ``<platform log dir or ./malaunch-logs>/node-I``."""
    if cluster.log_dir:
        return os.path.join(inputs.cwd, cluster.log_dir)
    root = (
        os.path.join(cluster.platform_log_dir, "malaunch")
        if cluster.platform_log_dir
        else os.path.join(inputs.cwd, "malaunch-logs")
    )
    return os.path.join(inputs.cwd, root, f"node-{cluster.node_rank}")


def node_ranks(cluster: ClusterEnv) -> range:
    """The global ranks of this host's processes (``node_rank * G`` up)."""
    per_host = cluster.procs_per_host
    return range(cluster.node_rank * per_host, (cluster.node_rank + 1) * per_host)


def make_plan(
    method: str,
    cluster: ClusterEnv,
    inputs: LaunchInputs,
    log_dir: str,
    processes: Sequence[ProcessSpec],
    log_source: str,
    rank_logs: Dict[int, str],
    notes: Sequence[str] = (),
    files: Optional[Dict[str, str]] = None,
    watch_workers: bool = False,
    births: Optional[str] = None,
) -> LaunchPlan:
    """The plan of a launcher's ``processes`` with everything every plan has (host, grace, report file...)."""
    report = (
        os.path.join(inputs.cwd, cluster.report_file) if cluster.report_file else os.path.join(log_dir, "report.json")
    )
    host = cluster.worker_hosts[cluster.node_rank] if cluster.worker_hosts else inputs.hostname
    return LaunchPlan(
        method=method,
        node_rank=cluster.node_rank,
        num_hosts=cluster.num_hosts,
        host=host,
        processes=tuple(processes),
        log_source=log_source,
        log_dir=log_dir,
        rank_logs=rank_logs,
        grace_period=cluster.grace_period,
        report_file=report,
        notes=tuple(notes) + inputs.notes,
        files=files or {},
        watch_workers=watch_workers,
        births=births,
    )
