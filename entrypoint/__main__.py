"""Run the shim: ``python -m malaunch.entrypoint BOOT_FILE [ARGS...]`` (``ma-entrypoint`` runs :func:`console_main`).

The entry script: :mod:`.main`'s phases in that order, with the three start-up choices by name the shim makes, each
worth its figure in bench/ (docs/performance.md, "Plain code (issue 41)"):

- a dry run imports the planning phase alone (:mod:`.start`), not the run phase (:mod:`.runphase`: the
  supervisor, the attempt loop, the output pumps, the report writer): 34.7 ms of CPU less per start (a fresh
  interpreter importing start alone against start and runphase, paired median of 30 at load 23 on 2 cores;
  37 ms for a whole 32,768-rank ``--dry-run``, 15 rounds at load 26);
- a run imports the hosts' coordinator (:mod:`.run.hosts.jobloop`: its server, link, book, messages, HMAC proofs,
  sockets and random nonces) only when its plan has several hosts (:func:`_coordinated`, the run phase's
  coordinated loop): 12.9 ms of CPU less for every one-host start (start and runphase imported with and without
  jobloop, paired median of 30 at load 20 on 2 cores);
- a run begins the job's guards (:class:`.run.procs.guards.EarlyGuards`: the watchdog, then the job's cgroup and
  the shim's move into it) before it imports the run phase, once the command line asks for a run
  (:func:`.start.asks_to_run`), where the run phase itself would begin them before planning: the kernel's wait
  to move the shim into the new cgroup (an RCU grace period, 10 to 15 ms) and the watchdog's boot on the other
  core then overlap the run phase's imports instead of coming after them. The last rank runs 11 ms sooner at 4
  ranks and 14 ms sooner at 8 (``bench/run.py --only startup --baseline`` side by side, medians of 42, quiet
  machine, 2 cores), at the same CPU. A command line the shim refuses, a help and a dry run begin nothing.

And one start-up setting: the cyclic collector is off while the shim's modules import, and what they made is then
frozen (``gc.freeze``: never traversed again), so no collection walks the hundred modules during planning and the
run: 13.8 ms of CPU less for a 4-rank start, 14.8 ms for an 8-rank one (the bench's start-up run with and without,
paired medians of 16 and 20 at load 8 on 2 cores). ``ma-entrypoint`` turns it off before its first import, so that
``typing`` and what it loads are not walked either (3.3M instructions of a 32,768-rank ``--dry-run``). A run turns
collection on again before anything is planned; a dry run, a process that plans, prints and ends, freezes what the
imports made and leaves it off to its end, so that no collection walks the rank table's columns once they are read
(3.1M instructions of the same dry run; callgrind, the whole process).
"""

from __future__ import annotations

import gc
import sys
from typing import TYPE_CHECKING, Callable, Mapping, NoReturn, Optional

if TYPE_CHECKING:
    from .plan.launch_plan import LaunchPlan
    from .report.report import RunResult
    from .run.attempts import RestartOutcome
    from .run.checkpoints import CheckpointKeeper
    from .run.hosts import HostsConfig
    from .run.launcher import Launcher
    from .run.policy import RestartPolicy
    from .run.procs.guards import EarlyGuards

__all__ = ["console_main"]


def _coordinated(plan: LaunchPlan, base_env: Mapping[str, str], policy: RestartPolicy,
                 run: Callable[..., RunResult], say: Callable[[str], None], launcher: Launcher,
                 hosts: HostsConfig, checkpoints: Optional[CheckpointKeeper]) -> RestartOutcome:  # fmt: skip
    """The run phase's loop for a host of several: the coordinator's modules load here, for such a plan alone."""
    from .run.hosts.jobloop import run_coordinated

    return run_coordinated(plan, base_env, policy, run, say, launcher, hosts, checkpoints)


def console_main() -> NoReturn:
    """The shim in a process of its own: plan, then print the plan (``--dry-run``) or run it; then its exit."""
    gc.disable()  # the modules' objects live as long as the process (see the module's docstring)
    from . import start
    from .contract.errors import ConfigError

    try:
        dry_run = "--dry-run" in start.split_argv(sys.argv[1:])[0]
    except ConfigError:  # a bad command line: start.main says so
        dry_run = False
    if dry_run:  # it plans, prints and ends: what it makes lives to its end, and the collector stays off
        gc.freeze()
        start.console_main()
    early: Optional[EarlyGuards] = None
    try:
        if start.asks_to_run(sys.argv[1:]):
            early = _begin_guards(start.process_environment())
        from .runphase import RunPhase
    except BaseException as stopped:  # what was begun is undone; a Ctrl-C is said in one line, as main says it
        if early is not None:
            early.abandon()
        if isinstance(stopped, KeyboardInterrupt):
            start.end_process(start.stopped_before_start())
        raise

    _collect_from_here()
    start.end_process(start.main(run_phase=RunPhase(_coordinated, early)))


def _begin_guards(environ: Mapping[str, str]) -> EarlyGuards:
    """The job's watchdog and cgroup, begun before the run phase's modules import (see the module's docstring)."""
    from .run.procs.guards import EarlyGuards

    return EarlyGuards.begin(environ)


def _collect_from_here() -> None:
    """Freeze what the imports made (never collected again) and turn the collector back on."""
    gc.freeze()
    gc.enable()


if __name__ == "__main__":
    console_main()
