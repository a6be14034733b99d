"""MindSpore dynamic-networking recovery's run hook: a failed process relaunched alone (its planning, and what the
shim starts: :mod:`.recovery_plan`).
"""

from __future__ import annotations

from typing import Optional, Tuple

from ...plan.launch_plan import ProcessSpec
from ...report.report import Failure, RunResult
from ...run.launcher import Relaunch
from ...run.policy import classify_result, describe_failure, should_restart
from .recovery_plan import MsrunRecoveryPlanner, relaunch_number, relaunch_spec

__all__ = ["MsrunRecoveryLauncher"]


class MsrunRecoveryLauncher(MsrunRecoveryPlanner):
    """MindSpore recovery's hooks: the processes are the ranks (and the scheduler), a failed one is relaunched."""

    def relaunch(self, spec: ProcessSpec, failure: Failure, relaunches: int, stopping: bool) -> Optional[Relaunch]:
        result = RunResult(failure.exit_code, failure, None, 0.0)
        kind = classify_result(result)
        says: Tuple[str, ...] = (f"{spec.name} failed: {describe_failure(result)}",)
        again = (
            kind is not None
            and relaunches < self.budget
            and not stopping
            and should_restart(self.policy, kind, result.exit_code)
        )
        if not again or kind is None:
            return Relaunch(None, 0.0, says)
        node_id = spec.env.get("MS_NODE_ID", "sched")
        says += (
            f"{spec.name} failed ({kind.kind}): relaunch {relaunches + 1} of {self.budget} with "
            f"MS_NODE_ID={node_id} in {self.delay:g}s",
        )
        return Relaunch(relaunch_spec(spec, relaunch_number(spec) + 1), self.delay, says)
