"""The facts one run recorded and the verdict built from them: which death is the root cause, the result.

Facts come as they happen (:meth:`RunFacts.record`): each process's exit, each worker death the watch saw, each
failure a launcher named; at the end the launcher's own (:meth:`~.launcher.Launcher.final_facts`). The root
cause is then decided by the pure :func:`~..report.rootcause.find_root_cause`, from the facts of the latest
launcher attempt, with the evidence each failed rank's log tail or error file gives (a death that names a peer's
failure never outranks one that does not). A relaunched process's facts decide nothing (:attr:`dropped`).
"""


from __future__ import annotations

import os.path
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Set, Tuple

from ..contract.errors import EXIT_LAUNCH
from ..plan.launch_plan import LaunchPlan
from ..report.failure_class import peer_failure
from ..report.report import Failure, LauncherAttempt, RunResult
from ..report.rootcause import Death, attempt_facts, find_root_cause, name_ranks, teardown_signals
from .launcher import Gate, Launcher
from .output import Output
from .procs.processes import ProcessGroup
from .procs.watch import WorkerWatch

if TYPE_CHECKING:  # loaded only when a run is found hung
    from .hang_report import Hung

__all__ = ["RunFacts", "peer_ended_failure", "shell_code"]


def shell_code(code: int) -> int:
    """A Popen return code as the shell shows it (128+N for signal N)."""
    return 128 - code if code < 0 else code


class RunFacts:
    """The facts of one run, and how a fact becomes a :class:`Failure` and the run a :class:`RunResult`."""

    def __init__(self, plan: LaunchPlan, launcher: Launcher, group: ProcessGroup, output: Output) -> None:
        self.plan, self.launcher, self.group, self.output = plan, launcher, group, output
        self.facts: List[Death] = []
        self.dropped: Set[int] = set()  # processes relaunched: their facts decide nothing any more

    def record(self, **fields: Any) -> Death:
        """Record one fact (in order: ``seq`` is the last tie-breaker)."""
        fact = Death(seq=len(self.facts), **fields)
        self.facts.append(fact)
        return fact

    def record_final(self, text: str, error_files: Dict[str, int], started_wall: float) -> None:
        """Record what the launcher wrote down (``text``: its output; the error files the watch saw)."""
        for fact in self.launcher.final_facts(self.plan, text, error_files, started_wall):
            self.record(source=fact.source, index=fact.index, rank=fact.rank, pid=fact.pid, code=fact.code,
                        at=fact.at, message=fact.message, attempt=fact.attempt, evidence=fact.evidence)  # fmt: skip

    def succeeded(self) -> Set[int]:
        """The processes recorded as ended with code 0 (a hang report never names such a rank while one runs)."""
        return {fact.pid for fact in self.facts if fact.code == 0 and fact.pid is not None}

    def statuses_known(self, watch: Optional[WorkerWatch]) -> bool:
        """The watch saw every worker of this host in the latest attempt and read the exit status of every
        worker death: the facts decide the root cause without the launcher's summary (and the workers write
        their output into files themselves). A worker that died before the watch's first look is known only to
        the launcher: then its summary is waited for."""
        if self.plan.log_source == "pipe" or watch is None:
            return False
        seen = dict(watch.attempt_ranks)  # a copy: the watch thread adds to it
        if not seen:
            return False
        latest = max(seen, key=lambda attempt: -1 if attempt is None else attempt)
        if not set(self.plan.rank_logs) <= set(seen[latest]):
            return False
        return all(fact.code is not None for fact in self.facts if fact.source == "watch")

    def says_peer_failed(self, death: Death, own: Sequence[str] = ()) -> bool:
        """The log tail of ``death``'s rank (or ``own``: what the worker wrote itself) names a peer's (or a
        collective's) failure."""

        lines = [*self.output.log_of(death.index, death.rank).tail(), *own]
        return peer_failure(lines) is not None

    def failure_of(self, death: Death) -> Failure:
        """The :class:`Failure` a fact names: who, where, how, its log and its last lines. A worker the launcher named
        by pid whose rank is not known (it ended before the watch read its rank, and left no birth record) is such a
        worker with its pid and its own code, its log the folder of the ranks' logs: never the launcher's own name
        or log."""
        spec = self.group.specs[death.index]
        rank = death.rank if death.rank is not None else spec.rank
        code = death.code if death.code is not None else 1
        local: Optional[int] = None
        tail: Tuple[str, ...] = ()
        if rank is None and death.source == "summary":
            folders = {os.path.dirname(path) for path in self.plan.rank_logs.values()}
            name = f"{spec.name} worker of unknown rank"
            log_file = folders.pop() if len(folders) == 1 else self.plan.log_dir
        else:
            ranks = sorted(self.plan.rank_logs)
            local = spec.local_rank if spec.rank is not None else (ranks.index(rank) if rank in ranks else None)
            sink = self.output.log_of(death.index, rank)
            name, log_file, tail = self.launcher.failure_name(spec, rank), sink.path, sink.tail()
        return Failure(
            name=name,
            rank=rank,
            local_rank=local,
            host=self.plan.host,
            pid=death.pid,
            exit_code=shell_code(code),
            signal=-code if code < 0 else None,
            log_file=log_file,
            tail=tail,
            message=death.message,
            source=death.source,
        )

    def _with_evidence(self, facts: List[Death]) -> List[Death]:
        """Each failed rank's facts with the peer failure its log tail or error file names."""

        found: Dict[int, Optional[str]] = {}
        for fact in facts:
            if fact.rank is not None and fact.rank not in found and (fact.code or fact.message):
                lines = list(self.output.log_of(fact.index, fact.rank).tail())
                messages = [f.message for f in facts if f.rank == fact.rank and f.message]
                found[fact.rank] = peer_failure(lines + messages)
        return [f.replace(evidence=found.get(f.rank)) if f.rank is not None else f for f in facts]

    def root_cause(
        self,
        escalated: bool,
        stopped: bool,
        pid_ranks: Optional[Dict[int, int]],
        teardown_at: Optional[float] = None,
    ) -> Optional[Failure]:
        """The root cause the facts of the latest attempt name (None: nothing failed, or only collaterally);
        ``teardown_at``: when the stop signal went out (see :func:`~..report.rootcause.find_root_cause`)."""
        kills = self.launcher.kills_peers
        collateral = teardown_signals(kills, escalated)
        attempts = sorted({fact.attempt for fact in self.facts if fact.attempt is not None})
        last = attempts[-1] if attempts else None
        live = [fact for fact in self.facts if fact.index not in self.dropped]
        facts = attempt_facts(live, last, True)  # an earlier launcher attempt's failure is not this one's
        if pid_ranks is not None:  # msrun names a worker by pid: the watch may have missed a short-lived one
            facts = name_ranks(facts, pid_ranks, sorted(self.plan.rank_logs))
        cause = find_root_cause(self._with_evidence(facts), collateral, stopped=stopped,
                                launcher_kills=kills and not escalated, teardown_at=teardown_at)  # fmt: skip
        return self.failure_of(cause.death)._replace(why=cause.why) if cause is not None else None

    def result(
        self,
        failure: Optional[Failure],
        shim_signal: Optional[int],
        hosts_end: Optional[str],
        started: float,
        gate: Gate,
        relaunched: Sequence[LauncherAttempt],
        hung: Optional[Hung] = None,
    ) -> RunResult:
        """The run's result: its exit code decided from the root cause (or the shim's signal)."""
        if failure is None and hosts_end is not None and shim_signal is None:
            failure = peer_ended_failure(self.plan.host, self.plan.processes[0].log_file, hosts_end)
        if shim_signal is not None:
            code = 128 + shim_signal
        elif failure is not None:
            code = failure.exit_code or 1
        else:
            code = 0
        history = gate.history(self.facts, failure, started, self.failure_of) or _relaunch_history(relaunched, failure)
        lost = self.output.lost_output()
        hang = tuple(rank.to_json() for rank in hung.ranks) if hung is not None and shim_signal is None else ()
        return RunResult(code, failure, shim_signal, time.monotonic() - started, history, lost, hang,
                         hung.score if hung is not None else 0)  # fmt: skip


def peer_ended_failure(host: str, log_file: str, line: str) -> Failure:
    """The root cause of a run the coordinator ended because another host failed or was lost (``line``)."""
    return Failure(name="another host", rank=None, local_rank=None, host=host, pid=None, exit_code=EXIT_LAUNCH,
                   signal=None, log_file=log_file, tail=(line,), source="peer")


def _relaunch_history(
    relaunched: Sequence[LauncherAttempt], failure: Optional[Failure]
) -> Tuple[LauncherAttempt, ...]:
    """Every relaunched process's failure, then the one that ended the run (when it failed)."""
    if not relaunched:
        return ()
    if failure is None:
        return tuple(relaunched)
    return (*relaunched, LauncherAttempt(len(relaunched), failure, 0.0, os.path.dirname(failure.log_file)))
