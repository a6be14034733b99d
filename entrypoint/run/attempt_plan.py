"""Attempt *K*'s plan, made from the plan: its own log folder and the attempt counters. Pure.

Logs go under ``<log dir>/attempt-K/`` (paths in ``--flag=PATH`` arguments too, and, for a launcher whose
``reroots_env`` is set, in the processes' own variables); every process gets ``TORCHELASTIC_RESTART_COUNT=K``,
``TORCHELASTIC_MAX_RESTARTS=N`` and ``MALAUNCH_ATTEMPT=K``; the launcher may change each command line
(``Launcher.attempt_argv``).
"""


from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Dict, Mapping, Tuple

from ..plan.launch_plan import LaunchPlan, ProcessSpec

if TYPE_CHECKING:  # a type only: the policy module (and the report it reads) is not needed to plan an attempt

    from ..contract.config import RestartPolicy

    ArgvHook = Callable[[ProcessSpec, int, int], Tuple[str, ...]]

__all__ = ["attempt_plan", "reroot"]



def reroot(path: str, root: str, attempt_dir: str) -> str:
    """``path`` under ``root`` moved to the same place under ``attempt_dir`` (other paths unchanged)."""
    prefix = root.rstrip(os.sep) + os.sep
    return os.path.join(attempt_dir, path[len(prefix) :]) if path.startswith(prefix) else path


def _reroot_arg(token: str, root: str, attempt_dir: str) -> str:
    if token.startswith("--") and "=" in token:
        flag, value = token.split("=", 1)
        return f"{flag}={reroot(value, root, attempt_dir)}"
    return token


def _reroot_env(env: Mapping[str, str], root: str, attempt_dir: str, moves: bool) -> Dict[str, str]:
    if not moves:
        return dict(env)
    return {key: reroot(value, root, attempt_dir) for key, value in env.items()}


def attempt_plan(
    plan: LaunchPlan, attempt: int, policy: RestartPolicy, argv_of: ArgvHook, reroots_env: bool
) -> LaunchPlan:
    """Attempt ``attempt``'s plan (0-based)."""
    counters = {
        "TORCHELASTIC_RESTART_COUNT": str(attempt),
        "TORCHELASTIC_MAX_RESTARTS": str(policy.max_restarts),
        "MALAUNCH_ATTEMPT": str(attempt),
    }
    root = plan.log_dir
    attempt_dir = os.path.join(root, f"attempt-{attempt}")
    processes = []
    for spec in plan.processes:
        moved = spec._replace(argv=tuple(_reroot_arg(token, root, attempt_dir) for token in spec.argv))
        processes.append(
            spec._replace(
                argv=argv_of(moved, attempt, policy.max_restarts),
                env={**_reroot_env(spec.env, root, attempt_dir, reroots_env), **counters},
                log_file=reroot(spec.log_file, root, attempt_dir),
            )
        )
    rank_logs = {rank: reroot(path, root, attempt_dir) for rank, path in plan.rank_logs.items()}
    note = f"attempt {attempt} of at most {policy.max_restarts + 1}: logs in {attempt_dir}"
    return plan._replace(
        processes=tuple(processes), rank_logs=rank_logs, log_dir=attempt_dir, notes=(*plan.notes, note)
    )
