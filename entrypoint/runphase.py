"""The shim's run phase (:class:`RunPhase`): what happens to this host's plan once :mod:`.start` made it.

The job's watchdog started and its cgroup entered before planning, then the attempts, each run by the supervisor,
the report and the notifications. The ranks get the environment itself, without the job's secret. Who decides what
comes next is pluggable, picked where the plan says how many hosts the job has: on one host the host alone
(:func:`~.run.attempts.run_with_restarts`), on several the coordinated loop the run phase was given (``coordinated``:
:func:`~.run.hosts.jobloop.run_coordinated`). This module imports no coordinator module: :mod:`.main` gives it
the coordinated loop, and the entry scripts (``__main__.py``, ``ma-entrypoint``) give one that loads the
coordinator when a plan has several hosts (docs/performance.md).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Optional

from .contract.config import Checkpoints, ShimConfig
from .contract.variables import without_secret
from .launchers.running import launcher_for
from .plan.launch_plan import LaunchPlan
from .plan.resolve import resolve_ipv4
from .report.report import RunResult, format_failure, report_json
from .report.reportfile import write_report
from .run import notifier
from .run.attempts import RestartOutcome, restart_report, run_with_restarts
from .run.checkpoints import DIR_VAR, CheckpointKeeper
from .run.hosts import HostsConfig, hosts_config
from .run.launcher import Launcher
from .run.policy import RestartPolicy
from .run.procs.guards import EarlyGuards
from .run.supervisor import run_plan
from .start import say, stderr

#: The attempt loop of a host of several, the coordinator deciding (:func:`~.run.hosts.jobloop.run_coordinated`):
#: ``(plan, base_env, policy, run, say, launcher, hosts, checkpoints) -> RestartOutcome``.
CoordinatedRun = Callable[
    [LaunchPlan, Mapping[str, str], RestartPolicy, Callable[..., RunResult], Callable[[str], None], Launcher,
     HostsConfig, Optional[CheckpointKeeper]],
    RestartOutcome,
]

__all__ = ["CoordinatedRun", "RunPhase"]


def _checkpoint_keeper(config: ShimConfig) -> Optional[CheckpointKeeper]:
    """The checkpoint folder's keeper, its folder checked (None without ``MALAUNCH_CHECKPOINT_DIR``). Every host
    prunes its view; only host 0 clears an earlier run's parts (:mod:`.run.checkpoints`). A relative folder (and
    source) is taken from the shim's working folder, as the log folder is, and the ranks get it absolute: a rank
    that changes its working folder still saves and resumes where the shim looks.

    Raises:
        ConfigError: the folder is not writable (exit 2).
    """
    given = config.checkpoints
    if given is None:
        return None
    source = os.path.abspath(given.source) if given.source is not None else None
    keeper = CheckpointKeeper(Checkpoints(os.path.abspath(given.directory), given.keep, source),
                              config.cluster.node_rank == 0, say)  # fmt: skip
    keeper.check()
    return keeper


def _announce(plan: LaunchPlan) -> None:
    ranks = len(plan.rank_logs) or len(plan.processes)  # a launcher (torchrun, msrun) is one process for N ranks
    started = "" if ranks == len(plan.processes) else f" (started by {plan.method})"
    say(
        f"method={plan.method} node_rank={plan.node_rank}/{plan.num_hosts} host={plan.host} "
        f"ranks={ranks}{started} log_dir={plan.log_dir}"
    )
    for note in plan.notes:
        say(note)


def _finish(plan: LaunchPlan, outcome: RestartOutcome) -> int:
    result = outcome.result
    problem = write_report(plan.report_file, {**report_json(result, plan), **restart_report(outcome)})
    if problem:
        say(problem)
    if result.root_cause is not None or result.shim_signal is not None:
        stderr(format_failure(result) + "\n")
    if outcome.classification is not None:
        kind = outcome.classification
        say(f"failure class: {kind.kind} ({'retryable' if kind.retryable else 'not retryable'}): {kind.description}")
    notifier.job_over(outcome)  # host 0 only (see install); at most the targets' timeout
    say(f"exit code {result.exit_code}; report: {plan.report_file}")
    return result.exit_code


def _hosts(config: ShimConfig, plan: LaunchPlan) -> Optional[HostsConfig]:
    """The coordinator settings of a multi-host job (None: one host, or no master address to reach)."""
    cluster = config.cluster
    if cluster.num_hosts < 2:
        return None
    names = cluster.worker_hosts
    addr = names[cluster.node_rank] if cluster.node_rank < len(names) else plan.host
    hosts = hosts_config(config.coordinator, cluster.node_rank, cluster.num_hosts, addr, cluster.master_addr,
                         cluster.job_id, cluster.master_wait, cluster.min_hosts, cluster.procs_per_host)  # fmt: skip
    if hosts is None and cluster.master_addr is None:
        say("no coordinator: the master host's address is unknown (set VC_WORKER_HOSTS); the hosts do not "
             "restart together and a lost host is noticed only by its peers' collectives")
    return hosts


class RunPhase:
    """The shim's run phase (:class:`.start.RunPhase`): what happens to a plan once it is made; ``coordinated`` runs
    the attempts of a host of several (see the module's docstring)."""

    def __init__(self, coordinated: CoordinatedRun, early: Optional[EarlyGuards] = None) -> None:
        """``early``: the job's guards, begun by the entry script before it imported this module (for the
        environment the run is given); without them :meth:`before_planning` begins them."""
        self.coordinated = coordinated
        self.early = early

    def before_planning(self, environ: Mapping[str, str]) -> None:
        if self.early is None:
            self.early = EarlyGuards.begin(environ)

    def resolve(self, name: str) -> str:
        return resolve_ipv4(name)

    def run(self, config: ShimConfig, plan: LaunchPlan, environ: Mapping[str, str]) -> Any:
        launcher = launcher_for(config)
        hosts = _hosts(config, plan)
        keeper = _checkpoint_keeper(config)
        _announce(plan)
        notifier.install(environ, plan, say)  # host 0 sends the job's events (MALAUNCH_NOTIFY)
        early = self.early

        def run(attempt: LaunchPlan, base_env: Mapping[str, str], **options: Any) -> RunResult:  # link, on_round
            return run_plan(attempt, base_env, launcher, early=early.take() if early is not None else None,
                            hang_timeout=config.hang_timeout, **options)  # fmt: skip

        ranks_env = without_secret(environ)
        if keeper is not None:
            ranks_env = {**ranks_env, DIR_VAR: keeper.config.directory}
        if hosts is None:
            return run_with_restarts(plan, ranks_env, config.policy, run, say, launcher, keeper)
        return self.coordinated(plan, ranks_env, config.policy, run, say, launcher, hosts, keeper)

    def finish(self, plan: LaunchPlan, outcome: Any) -> int:
        return _finish(plan, outcome)

    def abandon(self) -> None:
        if self.early is not None:
            self.early.abandon()  # a run that started removed the cgroup and ended the watchdog; else this does
