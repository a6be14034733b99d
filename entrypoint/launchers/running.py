"""Run a plan once with its launcher: the launchers' registry (:mod:`.`) joined to the supervisor.

Apart from the registry, which the planning phase (a dry run) imports without the run phase.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, BinaryIO, Mapping, Optional

from ..run.supervisor import run_plan as supervise
from . import launcher_of

if TYPE_CHECKING:
    from ..contract.config import ShimConfig
    from ..plan.launch_plan import LaunchPlan
    from ..report.report import RunResult

__all__ = ["run_plan"]


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
