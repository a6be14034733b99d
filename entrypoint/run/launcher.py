"""The :class:`Launcher` interface: everything the run needs to know about a launch method, as hooks.

The supervisor (:mod:`.supervisor`) and the attempt loop (:mod:`.attempts`) never ask which method runs: they
call these hooks. Each method is one module under :mod:`malaunch.entrypoint.launchers` with one subclass that
overrides what differs. The defaults here describe the simplest method: every process of the plan is a rank,
its output comes through pipes, it writes no summary, nobody restarts anything but the attempt loop.

Hooks, by who calls them:

- planning (``main`` and :mod:`..plan.prepare`): :meth:`Launcher.needs`, :meth:`Launcher.plan`;
- the attempt loop: :meth:`Launcher.plan_attempt`, :meth:`Launcher.attempt_limit`, :meth:`Launcher.restarts_workers`;
- output (:mod:`.output`): :meth:`Launcher.attempt_follower`, :meth:`Launcher.read_lines`;
- the supervisor: :attr:`Launcher.starts_workers`, :attr:`Launcher.attempt_variables`,
  :attr:`Launcher.kills_peers`, :meth:`Launcher.summary_written`, :meth:`Launcher.final_facts`,
  :meth:`Launcher.gate`, :meth:`Launcher.relaunch`, :meth:`Launcher.failure_name`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ..plan.inputs import Needs
from ..plan.launch_plan import ProcessSpec
from .attempt_plan import attempt_plan

if TYPE_CHECKING:
    from ..contract.cluster_env import ClusterEnv
    from ..plan.inputs import LaunchInputs, Needs
    from ..plan.launch_plan import LaunchPlan
    from ..report.failure_class import Classification
    from ..report.report import Failure, LauncherAttempt
    from ..report.rootcause import Death
    from .output.console import Console
    from .output.pump import FileFollower, Sink
    from .output.splice import SpliceSink
    from .policy import RestartPolicy
    from .procs.proctree import ProcKey
    from .procs.watch import WorkerDeath

__all__ = ["Gate", "Launcher", "LauncherSays", "Relaunch"]


class LauncherSays(NamedTuple):
    """What a launcher's own output lines tell the supervisor."""

    quiet: bool = False  # it starts its teardown chatter: from here on its lines go to its log file only
    failures: Tuple[Tuple[int, int], ...] = ()  # (worker pid, exit code) it says failed


class Relaunch(NamedTuple):
    """One process of the plan started again alone after ``delay`` seconds (the others keep running); ``spec``
    None: it is not started again, the job ends."""

    spec: Optional[ProcessSpec]
    delay: float
    says: Tuple[str, ...] = ()  # the lines the shim prints about it


class Gate:
    """Judges the failures of a launcher that restarts its workers itself (the interface; this base judges
    nothing: the gate of every launcher that does not restart by itself).

    ``hold`` is called by the watch thread as a worker dies, ``judge`` by the event loop for the same death: a
    class returned ends the job, None lets the launcher go on. ``history`` gives every attempt the launcher made.
    """

    def hold(self, death: WorkerDeath) -> None:
        """Watch thread: a worker died (stop the launcher while it is judged)."""

    def judge(self, death: WorkerDeath) -> Optional[Classification]:
        """Event loop: the class of ``death`` when it ends the job, else None."""
        return None

    def release(self) -> None:
        """Before the final teardown: let every held launcher go."""

    def own_output(self, death: WorkerDeath) -> Tuple[str, ...]:
        """The last lines the dead worker wrote itself, complete at its death (empty: not known here)."""
        return ()

    def history(
        self,
        facts: Sequence[Death],
        final: Optional[Failure],
        started: float,
        failure_of: Callable[[Death], Failure],
    ) -> Tuple[LauncherAttempt, ...]:
        """Every attempt the launcher made itself (empty: it made none)."""
        return ()



class Launcher:
    """One launch method's hooks (these defaults: one process per rank, pipes, no launcher in between)."""

    #: The ``LaunchPlan.method`` this launcher plans and runs.
    method = ""
    #: The plan's processes are launchers that start the ranks (watched as workers, named ``rank-N``).
    starts_workers = False
    #: Environment variables of a worker that give its launcher's own attempt, the first one present wins.
    attempt_variables: Tuple[str, ...] = ()
    #: Each worker leads a process group of its own (msrun starts every worker with ``setsid``): a child of the
    #: launcher that does not is one of its helpers (msrun's ``tail`` and ``grep`` inherit a worker's
    #: ``MS_NODE_ID``), never a worker, whatever its environment says.
    workers_lead_groups = False
    #: The launcher SIGKILLs a failed worker's peers itself (their SIGKILL is collateral, not a failure).
    kills_peers = False
    #: A failed process may be started again alone (:meth:`relaunch` decides).
    relaunches = False

    # -- planning -------------------------------------------------------------------------------------------
    def needs(self, cluster: ClusterEnv) -> Needs:
        """What must be gathered before :meth:`plan` (the rank table, the master's address, ...)."""

        return Needs()

    def plan(self, cluster: ClusterEnv, inputs: LaunchInputs) -> LaunchPlan:
        """This host's plan. Pure: same inputs, same plan."""
        raise NotImplementedError

    def owns(self, plan: LaunchPlan) -> bool:
        """Whether ``plan`` is one of this launcher's."""
        return plan.method == self.method

    # -- attempts ---------------------------------------------------------------------------------------------
    def plan_attempt(self, plan: LaunchPlan, attempt: int, policy: RestartPolicy) -> LaunchPlan:
        """Attempt ``attempt``'s plan (0-based): its own log folder and the attempt counters. Pure."""

        if policy.max_restarts <= 0:
            return plan
        return attempt_plan(plan, attempt, policy, self.attempt_argv, self.reroots_env)

    def plan_members(self, plan: LaunchPlan, attempt: int, members: int) -> LaunchPlan:
        """Attempt ``attempt``'s plan when the coordinator started it with ``members`` hosts (elastic). Pure."""
        return plan

    def attempt_argv(self, spec: ProcessSpec, attempt: int, most: int) -> Tuple[str, ...]:
        """A process's command line in attempt ``attempt`` of at most ``most`` restarts."""
        return spec.argv

    #: Paths in the processes' own variables move into the attempt's folder too.
    reroots_env = False

    def attempt_limit(self, plan: LaunchPlan, policy: RestartPolicy) -> int:
        """How many times the attempt loop may start the plan."""
        return policy.max_restarts + 1

    def restarts_workers(self, plan: LaunchPlan) -> bool:
        """Whether the launcher of the attempt plan ``plan`` restarts its workers itself inside one attempt
        (torchrun's ``--max_restarts``): the run reports its own attempts' times (:mod:`.recovery`)."""
        del plan
        return False

    def announces_attempts(self, policy: RestartPolicy) -> bool:
        """Whether the attempts are announced to the peer hosts (they restart together)."""
        return policy.max_restarts > 0

    # -- output -------------------------------------------------------------------------------------------------
    def attempt_follower(
        self,
        plan: LaunchPlan,
        rank_sinks: Mapping[int, SpliceSink],
        launcher_sink: Sink,
        out: Console,
        err: Console,
        relabel: Callable[[int, int], None] = lambda place, rank: None,
    ) -> Optional[FileFollower]:
        """For ``log_source == "attempt_files"``: the follower that copies the workers' files into the rank logs.
        ``relabel(place, rank)``: the worker of this host's place rank ``place`` sees itself as rank ``rank``
        (an elastic rendezvous numbers the hosts its own way): its log and console prefix take that rank, before
        its first byte is copied (:meth:`.output.Output.relabel`)."""
        return None

    def read_lines(self, plan: LaunchPlan, lines: bytes) -> LauncherSays:
        """What the launcher process's own output lines say."""
        return LauncherSays()

    # -- facts and the ending ----------------------------------------------------------------------------------
    def summary_written(self, text: str) -> bool:
        """The launcher printed its whole failure summary (``text``: its output so far); it can be ended."""
        return False

    def final_facts(
        self, plan: LaunchPlan, text: str, error_files: Dict[str, int], started_wall: float
    ) -> List[Death]:
        """What the launcher wrote down, read once every process ended (its summary, error files)."""
        return []

    def gate(self, plan: LaunchPlan, launchers: Dict[int, ProcKey]) -> Gate:
        """The judge of the launcher's own restarts (``launchers``: plan index -> the launcher, pid and start)."""
        return Gate()

    def relaunch(self, spec: ProcessSpec, failure: Failure, relaunches: int, stopping: bool) -> Optional[Relaunch]:
        """A process failed: start it again alone (a :class:`Relaunch`), or None (or no spec) to end the job.
        ``relaunches``: how many were made so far; ``stopping``: the shim was told to stop."""
        return None

    def failure_name(self, spec: ProcessSpec, rank: Optional[int]) -> str:
        """The name a failure of ``rank`` (through process ``spec``) is reported under."""
        if self.starts_workers and rank is not None:
            return f"rank-{rank}"
        return spec.name
