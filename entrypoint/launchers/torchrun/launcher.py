"""torchrun's run hooks: following the workers' own files into the rank logs (:mod:`.logs`), torchrun's failure
summary (:mod:`.summary`) and the workers' error files (:mod:`.errors`) as facts, and the gate of the restarts
torchrun makes itself (:mod:`.gate`). Its planning is :mod:`.plan`.
"""

from __future__ import annotations

import os.path
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping

from ...plan.launch_plan import LaunchPlan
from ...report.rootcause import Death
from ...run.launcher import Gate, LauncherSays
from .elastic import is_elastic
from .errors import read_error_files, torchrun_log_dir
from .gate import AttemptGate
from .logs import TorchrunLogs
from .plan import TorchrunPlanner
from .summary import parse_torchrun_failures, summary_written

if TYPE_CHECKING:
    from ...run.output.console import Console
    from ...run.output.pump import FileFollower, Sink
    from ...run.output.splice import SpliceSink
    from ...run.procs.proctree import ProcKey

__all__ = ["TorchrunLauncher"]

#: torch elastic's agent logs this as a worker of its group fails (``... failed (exitcode: -9) local_rank: 1``).
_AGENT_FAILED = b"failed (exitcode:"


class TorchrunLauncher(TorchrunPlanner):
    """The torchrun method's hooks: its planning (:class:`.plan.TorchrunPlanner`) and its run."""

    def attempt_follower(
        self,
        plan: LaunchPlan,
        rank_sinks: Mapping[int, SpliceSink],
        launcher_sink: Sink,
        out: Console,
        err: Console,
        relabel: Callable[[int, int], None] = lambda place, rank: None,
    ) -> FileFollower:
        argv = plan.processes[0].argv
        log_dir = torchrun_log_dir(argv) or os.path.join(plan.log_dir, "torchrun")
        elastic = relabel if is_elastic(argv) else None  # a static rendezvous gives each host its place's ranks
        return TorchrunLogs(log_dir, sorted(plan.rank_logs), rank_sinks, launcher_sink, out, err, elastic)

    def read_lines(self, plan: LaunchPlan, lines: bytes) -> LauncherSays:
        # the agent saw a worker fail (one the watch may have missed): what it prints from here on is teardown
        # chatter, its log file only; quiet now, before these very lines reach the console
        return LauncherSays(quiet=plan.watch_workers and _AGENT_FAILED in lines)

    def summary_written(self, text: str) -> bool:
        return summary_written(text)

    def final_facts(self, plan: LaunchPlan, text: str, error_files: Dict[str, int], started_wall: float) -> List[Death]:
        """torchrun's summary (absent when the shim ended torchrun first) and the workers' error files."""

        facts = [
            Death(source="summary", index=0, rank=entry.rank, pid=entry.pid, code=entry.exitcode)
            for entry in parse_torchrun_failures(text)
        ]
        for record in read_error_files(error_files, plan.processes[0].argv, sorted(plan.rank_logs), started_wall):
            facts.append(Death(source="error_file", index=0, rank=record.rank, pid=None, code=None,
                               message=record.message, attempt=record.attempt))  # fmt: skip
        return facts

    def gate(self, plan: LaunchPlan, launchers: Dict[int, ProcKey]) -> Gate:
        return AttemptGate(plan.restart_on, launchers)
