"""The attempt loop of a host in a multi-host job: the coordinator says which attempt runs, and when it ends.

The one attempt loop (:class:`~..attempts.AttemptLoop`) runs each attempt; where :class:`~..attempts.HostAlone`
decides alone on one host, :class:`Coordinated` does what the job's coordinator says:

1. The master host (index 0) serves the coordinator (:mod:`.server`); every host joins it (:mod:`.link`).
2. The host waits for ``start K`` (attempt 0 once every host joined), runs attempt K with the ``run`` function,
   and tells the coordinator as soon as its attempt fails (``failing``: the others end theirs now) and how it
   ended (``over``, with its root cause, its class and whether ``restart_on`` accepts it).
3. Then it waits again: ``start K+1`` (every host together, after the back-off; the budget ``MA_MAX_RESTARTS``
   is the job's) or ``finish CODE``: the shim exits with the job's code, its report naming the job's root
   cause, the same on every host. A host whose coordinator is gone for good exits 75 (``host_lost``).
4. A stop signal (SIGTERM, SIGINT, SIGHUP) during an attempt ends it as always; between attempts it ends the
   shim at once (``stopped_in_backoff``).
5. Elastic torchrun (``MALAUNCH_MIN_HOSTS``): ``start K`` names the attempt's hosts; the attempt's torchrun
   gets its own rendezvous and that many hosts (:meth:`~..launcher.Launcher.plan_members`), every attempt its
   own folder, and the report each attempt's ``members`` and ``world_size`` and each change of them
   (:func:`membership_event`).
6. What it says names the job's root cause as the coordinator chose it, in one form
   (:func:`~...report.causetext.describe_cause`): the restart line, and the report. As it happens, the master
   says and notes (``events.jsonl``, :mod:`..attempt_status`) a host lost or back and the wait for a lost host,
   which its ``attempt.json`` announces with the deadline (:class:`~.bookwatch.BookWatch`); a host that lost
   the master does the same for host 0; every host notes each change of an elastic job's hosts.
"""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ...contract.errors import EXIT_CONFIG, PROG, LaunchError
from ...plan.launch_plan import LaunchPlan
from ...report.causetext import describe_cause
from ...report.failure_class import Classification, classify_failure, peer_failure
from ...report.report import Failure, RunResult
from .. import notifier
from ..attempt_status import note_event
from ..attempts import Attempt, AttemptLoop, RestartOutcome, Step
from ..checkpoints import CheckpointKeeper
from ..events import Event
from ..launcher import Launcher
from ..policy import RestartPolicy, backoff_for, should_restart
from ..prepare_steps import end_result
from . import HostsConfig
from .bookwatch import BookWatch, clock_watch
from .jobstate import EXIT_HOST_LOST, JobState
from .link import Finish, Gone, HostLink, Start
from .messages import Cause
from .saves import SaveWatch
from .server import Coordinator
from .wire import job_key

if TYPE_CHECKING:
    from ...report.failure_class import Classification

__all__ = ["Coordinated", "membership_event", "run_coordinated"]

_TAIL = 5
_LINE = 160
_PREPARE_LINE = 400  # a prepare step's line names the step's argv (shortened to 120 characters) after the host


class _AttemptSide:
    """The link as one attempt's supervisor sees it (:class:`~..events.AttemptLink`)."""

    def __init__(self, link: HostLink, attempt: int) -> None:
        self.link, self.attempt = link, attempt

    def attach(self, post: Optional[Callable[[Event], None]]) -> None:
        self.link.attach(post)

    def failing(self, hold: float = 0.0) -> None:
        self.link.failing(self.attempt, hold)

    def silent(self, silent: bool, ended: bool = False) -> None:
        self.link.silent(self.attempt, silent, ended)


def serve(config: HostsConfig, max_restarts: int, policy: RestartPolicy, say: Callable[[str], None]) -> Coordinator:
    """Start the job's coordinator (the master host's shim). Raises :class:`LaunchError` if the port is taken."""

    lost = classify_failure(EXIT_HOST_LOST, (f"ma-entrypoint: host 1 ({config.addr}) lost: x",))
    state = JobState(config.num_hosts, max_restarts, should_restart(policy, lost, EXIT_HOST_LOST),
                     lambda restart: backoff_for(policy, restart), config.host_wait, config.join_wait,
                     time.monotonic(), config.min_hosts)  # fmt: skip
    try:
        server = Coordinator(job_key(config.secret), state, config.port, config.interval, config.heartbeat_timeout,
                             say)  # fmt: skip
    except OSError as error:
        raise LaunchError(
            f"cannot serve the job's coordinator on port {config.port}: {error.strerror or error}; set "
            "MALAUNCH_COORDINATOR_PORT (launcher.coordinator_port) to a free port"
        ) from None
    return server.start()


def run_coordinated(plan: LaunchPlan, base_env: Mapping[str, str], policy: RestartPolicy, run: Callable[..., RunResult],
                    say: Callable[[str], None], launcher: Launcher, config: HostsConfig,
                    checkpoints: Optional[CheckpointKeeper] = None) -> RestartOutcome:  # fmt: skip
    """Run ``plan``'s attempts as the job's coordinator says (see the module's docstring)."""
    return Coordinated(plan, base_env, policy, run, say, launcher, config, checkpoints).run()


class Coordinated(AttemptLoop):
    """The attempt loop of a host of a coordinated job: the coordinator decides what comes next."""

    def __init__(self, plan: LaunchPlan, base_env: Mapping[str, str], policy: RestartPolicy,
                 run: Callable[..., RunResult], say: Callable[[str], None], launcher: Launcher,
                 config: HostsConfig, checkpoints: Optional[CheckpointKeeper] = None) -> None:  # fmt: skip
        super().__init__(plan, base_env, policy, run, say, launcher, _plan_policy(policy, config), checkpoints)
        self.config = config
        self.server: Optional[Coordinator] = None
        self.link: Optional[HostLink] = None
        self.command: Optional[Start] = None  # the running (or last) attempt's start
        self.result: Optional[RunResult] = None
        self.told: Optional[Cause] = None  # this host's account of its last failed attempt (``over``)
        self.gone: Optional[Tuple[str, float]] = None  # the coordinator's loss this host last said
        self.saves = SaveWatch(checkpoints.config.directory if checkpoints is not None else None,
                               lambda parts: self._link().send(parts), say)  # saves completed (:mod:`.saves`)
        self.hosts: Dict[str, Any] = {"host": config.host, "num_hosts": config.num_hosts, "master": config.master,
                                      "port": config.port, "secret_given": config.secret_given}  # fmt: skip
        if config.min_hosts is not None:
            self.hosts.update(min_hosts=config.min_hosts, membership=[])

    # -- the session ------------------------------------------------------------------------------------------
    def begin(self) -> None:
        config = self.config
        self.server = serve(config, self.limit - 1, self.policy, self.say) if config.host == 0 else None
        if self.server is not None:
            self.server.watch = clock_watch(self.recovery, BookWatch(self.plan.log_dir, self.say, self.announce))
        master = "127.0.0.1" if self.server else config.master
        self.link = HostLink(job_key(config.secret), config.host, config.addr, master, config.port,
                             config.interval, config.heartbeat_timeout, config.join_wait, config.host_wait,
                             self.say, self.plan.log_dir)  # fmt: skip
        self.link.ready = self.plan.prepare is None  # a host joins at once, and prepares (first()) once joined
        self.link.on_saved, self.link.on_joined = self.saves.start().saved, self.saves.joined
        self.link.heard = self.saves.heard
        self.link.start()

    def end(self) -> None:
        self.saves.close()
        if self.link is not None:
            self.link.close()
        if self.server is not None:
            self.server.close()

    def _link(self) -> HostLink:
        assert self.link is not None, "begin() starts the link"
        return self.link

    # -- what the coordinator decides --------------------------------------------------------------------------
    def first(self) -> Step:
        """This host's prepare steps (joined already: the coordinator waits for every host's), then the first
        command."""
        link = self._link()
        if self.plan.prepare is None:
            return self._next()
        end = self.prepare(lambda: link.ended)
        if end.stopped is not None:
            return self._stopped()
        if end.failure is not None:
            self.result = end_result(end, self.elapsed())
            failure = end.failure
            tail = tuple(line[:_PREPARE_LINE] for line in failure.tail[-_TAIL:])  # the last: the step's whole line
            link.prepared(Cause(addr=self.config.addr, name=failure.name, code=failure.exit_code,
                                signal=failure.signal, kind="prepare_failed", line=tail[-1], tail=tail,
                                log=failure.log_file[-200:]))  # fmt: skip
        elif not end.cancelled:
            link.prepared(None)
        return self._next()

    def after(self, index: int, result: RunResult, log_dir: str) -> Step:
        assert self.command is not None
        self.result = result
        kind = self.record(index, result, log_dir)
        if self.command.members is not None:
            self.attempts[-1].members = self.command.members
            self.attempts[-1].world_size = len(self.command.members) * self.config.procs_per_host
        self.told = _cause(result, kind, self.policy, self.config) if kind is not None else None
        stopped = result.shim_signal is not None  # this host was stopped during the attempt: it leaves the job now
        # said before the coordinator hears it: its answer (a wait for a lost host) is announced after this
        self.announce(index, "backoff" if kind is not None and not stopped else "ended")
        self.saves.flush()  # its ranks are gone: the parts they left are told before the attempt's end
        self._link().over(index, self.told)
        return self._outcome(self._own_result()) if stopped else self._next()

    def _next(self) -> Step:
        link = self._link()
        command = link.next_command(self._wait)
        if command is None:
            return self._stopped()
        if isinstance(command, Start):
            self._watch_link()
            if self.attempts:
                last = self.attempts[-1]
                last.restarted, last.cause = True, command.cause or self.told
                self.say(_restart_line(last.index, command, self.policy, self.told))
                notifier.attempt_over(self.attempts)
            self.command = command
            problem = self.saves.agree(command.resume, f"host {self.config.host} ({self.config.addr})")
            return command.attempt if problem is None else self._refuse(command.attempt, problem)
        if isinstance(command, Gone):
            self.announce(max(link.last_attempt, 0), "ended")
            line = f"ma-entrypoint: host 0 ({self.config.master}) lost: {command.why}"
            lost = Cause(host=0, addr=self.config.master, kind="host_lost", retryable=True, line=line, tail=(line,))
            return self._outcome(self._final(EXIT_HOST_LOST, lost))
        return self._finish(command)

    def _refuse(self, attempt: int, problem: str) -> Step:
        """This host's folder cannot hold the checkpoint ``attempt`` resumes from: no rank starts (:func:`_refusal`);
        the attempt is the report's and the console's like any failed one (its class, its line, the job's cause)."""
        self.say(f"attempt {attempt} of at most {self.limit}: {problem}")
        self._link().last_attempt = attempt
        self.told, self.result = _refusal(problem, self.config.addr, self.plan.log_dir, self.elapsed())
        refused = self.result._replace(duration=0.0)  # it ran nothing
        self.attempts.append(Attempt(attempt, refused, _job_class(refused, self.told), False, self.plan.log_dir))
        self._link().failing(attempt)
        self._link().over(attempt, self.told)
        return self._next()

    def _wait(self, seconds: float) -> bool:
        """Between attempts: whether a stop signal came (and :meth:`_watch_link`)."""
        self._watch_link()
        return self.stop.wait(seconds) is not None

    def _watch_link(self) -> None:
        """Note the coordinator lost or back (a host that joins the master's coordinator again waits for it, as
        the others wait for a lost host: ``attempt.json`` says until when)."""
        link = self._link()
        gone = link.gone
        if gone != self.gone:
            self.gone = gone
            attempt, master = max(link.last_attempt, 0), f"host 0 ({self.config.master})"
            if gone is not None:
                note_event(self.plan.log_dir, "HostLost", f"{master} lost: {gone[0]}", "Warning", host=0)
                self.announce(attempt, "waiting", {"host": 0, "addr": self.config.master, "why": f"lost: {gone[0]}",
                                                   "until": gone[1]})  # fmt: skip
            else:
                note_event(self.plan.log_dir, "HostBack", f"{master}: its coordinator answers again", host=0)
                self.announce(attempt, "backoff")

    # -- each attempt -----------------------------------------------------------------------------------------
    def attempt_plan(self, index: int) -> LaunchPlan:
        command = self.command
        attempt_plan = super().attempt_plan(index)
        if command is not None and command.members is not None:
            attempt_plan = self.launcher.plan_members(attempt_plan, index, len(command.members))
            self._membership(command)
        return attempt_plan

    def starting(self, index: int) -> None:
        self._link().last_attempt = index
        self.saves.begin(index)
        if self.checkpoints is not None and self.command is not None:  # it resumes from the one the coordinator named
            self.checkpoints.agreed = self.command.resume.name if self.command.resume is not None else None

    def run_options(self, index: int) -> Dict[str, Any]:
        return {"link": _AttemptSide(self._link(), index)}

    def _membership(self, command: Start) -> None:
        """Elastic: note attempt K's hosts, and the change from the attempt before (an event in the report)."""
        assert command.members is not None
        events: List[Dict[str, Any]] = self.hosts["membership"]
        before = events[-1]["members"] if events else list(range(self.config.num_hosts))
        event = membership_event(command.attempt, before, command.members, self.config.procs_per_host,
                                 command.free)  # fmt: skip
        if event is not None:
            events.append(event)
            self.say(event["line"])
            note_event(self.plan.log_dir, "HostsChanged", event["line"], "Warning" if event["left"] else "Info")

    # -- the end ------------------------------------------------------------------------------------------------
    def _finish(self, command: Finish) -> RestartOutcome:
        if self.attempts and self.attempts[-1].index == self._link().last_attempt:
            self.attempts[-1].cause = command.cause
        elif command.cause is not None:  # no attempt ran here (a prepare step failed): kept here
            self.hosts["job_cause"] = command.cause.to_wire()
        self.announce(max(self._link().last_attempt, 0), "ended")
        if command.code == 0 and self.result is not None:
            return self._outcome(self._own_result(), None)
        return self._outcome(self._final(command.code, command.cause or Cause()))

    def _final(self, code: int, cause: Cause) -> RunResult:
        own = self.result.root_cause if self.result is not None else None
        if cause.host == self.config.host and own is not None and own.source != "peer":
            return RunResult(code, own._replace(chosen=cause.why or None), None, self.elapsed())
        return RunResult(code, _told_failure(code, cause), None, self.elapsed())

    def _own_result(self) -> RunResult:
        assert self.result is not None
        return self.result._replace(duration=self.elapsed())

    def _stopped(self) -> RestartOutcome:
        signum = self.stop.signum or signal.SIGTERM
        self.say(f"received {signal.Signals(signum).name} while waiting for the other hosts: stopping, "
                 "no further attempt")  # fmt: skip
        self.announce(max(self._link().last_attempt, 0), "ended")
        final = RunResult(128 + signum, None, signum, self.elapsed())
        return RestartOutcome(final, tuple(self.attempts), self.policy, stopped_in_backoff=signum, hosts=self.hosts)

    def _outcome(self, final: RunResult, cause: Optional[Cause] = None) -> RestartOutcome:
        return RestartOutcome(final, tuple(self.attempts), self.policy, hosts=self.hosts,
                              job_class=_job_class(final, cause))  # fmt: skip


def _job_class(final: RunResult, cause: Optional[Cause]) -> Optional[Classification]:
    """The job's failure class: that of its root cause (``cause``'s class when its own facts agree)."""
    if final.exit_code == 0 or final.shim_signal is not None or final.root_cause is None:
        return None
    origin = "shim" if final.root_cause.name == PROG else "rank"  # the shim's own refusal (_refuse)
    found = classify_failure(final.exit_code, final.root_cause.tail, signal=final.root_cause.signal, origin=origin)
    kind = cause.kind if cause is not None else None
    return Classification(kind, found.retryable, found.reason) if kind == found.kind else found


def _told_failure(code: int, cause: Cause) -> Failure:
    """The root cause another host told (or the coordinator found: a host lost) as this host's report names it."""
    host = cause.host
    line = cause.line or f"host {host} failed"
    lost = cause.kind == "host_lost" and not cause.ended and host is not None
    why = (f"the job's coordinator found host {host} lost" if lost else
           f"host {host} reported it to the job's coordinator")  # fmt: skip
    return Failure(name=cause.name or f"host {host}", rank=cause.rank, local_rank=None,
                   host=cause.addr or f"host {host}", pid=None, exit_code=code, signal=cause.signal,
                   log_file=cause.log, tail=(cause.tail or (line,))[-_TAIL:], source="lost" if lost else "peer",
                   why=why, chosen=cause.why or None)  # fmt: skip


def _plan_policy(policy: RestartPolicy, config: HostsConfig) -> RestartPolicy:
    """The policy the attempts' plans are made with: elastic, every attempt has its own folder and counters
    (a change of hosts restarts the job however many restarts ``MA_MAX_RESTARTS`` allows)."""
    if config.min_hosts is None or policy.max_restarts > 0:
        return policy
    return policy._replace(max_restarts=1)


def membership_event(attempt: int, before: Sequence[int], members: Sequence[int], per_host: int,
                     free: bool) -> Optional[Dict[str, Any]]:  # fmt: skip
    """The report's event for attempt ``attempt`` starting with ``members`` after ``before``; None: no change.
    Pure. Shape: ``{"at", "attempt", "members", "world_size", "left", "joined", "charged", "line"}``."""
    left = sorted(set(before) - set(members))
    joined = sorted(set(members) - set(before))
    if not left and not joined:
        return None
    size = len(members) * per_host
    said = "; ".join(part for part in (f"host(s) {', '.join(map(str, left))} left" if left else "",
                                       f"host(s) {', '.join(map(str, joined))} joined" if joined else "") if part)
    line = (f"the job's hosts changed ({said}): attempt {attempt} runs on {len(members)} host(s), world size "
            f"{size}{'' if not free else ', not charged to MA_MAX_RESTARTS'}")  # fmt: skip
    return {"at": round(time.time(), 3), "attempt": attempt, "members": sorted(members), "world_size": size,
            "left": left, "joined": joined, "charged": not free, "line": line}  # fmt: skip


def _restart_line(index: int, command: Start, policy: RestartPolicy, own: Optional[Cause] = None) -> str:
    """The line of a restart of the job: attempt ``index``'s root cause as the coordinator chose it, else (a
    coordinator that was replaced does not know it) as this host saw it (``own``)."""
    if command.free:
        return (f"attempt {index} of the job ended with a change of its hosts: every host here starts attempt "
                f"{command.attempt} now")  # fmt: skip
    cause = command.cause or own
    said = f"root cause {describe_cause(cause.to_wire())}" if cause is not None else "its root cause is not known"
    return (f"attempt {index} of the job ended: {said}: every host starts attempt {command.attempt} of "
            f"{policy.max_restarts} now")  # fmt: skip


def _refusal(problem: str, addr: str, log: str, elapsed: float) -> Tuple[Cause, RunResult]:
    """This host's account (and result) of an attempt it started no rank of: its folder cannot hold the checkpoint
    the job resumes from (:mod:`.saves`); exit 2, ``launcher_misuse``: no restart can mend a folder. ``log``: its
    log folder (its console says it)."""
    line = f"{PROG}: error: {problem}"
    cause = Cause(addr=addr, name=PROG, code=EXIT_CONFIG, kind="launcher_misuse", line=line, tail=(line,),
                  log=log[-200:])  # fmt: skip
    failure = Failure(name=PROG, rank=None, local_rank=None, host=addr, pid=None, exit_code=EXIT_CONFIG,
                      signal=None, log_file=log, tail=(line,), source="exit",
                      why="this host's shim started no rank: it cannot resume from the job's checkpoint")
    return cause, RunResult(EXIT_CONFIG, failure, None, elapsed)


def _cause(result: RunResult, kind: Classification, policy: RestartPolicy, config: HostsConfig) -> Cause:
    """This host's account of a failed attempt, for the coordinator (small: a few short lines)."""

    failure = result.root_cause
    accept = result.shim_signal is None and should_restart(policy, kind, result.exit_code)
    tail = [line[:_LINE] for line in (failure.tail if failure is not None else ())][-_TAIL:]
    return Cause(
        addr=config.addr, rank=failure.rank if failure else None, name=failure.name if failure else "",
        code=result.exit_code, signal=failure.signal if failure else None, kind=kind.kind,
        retryable=kind.retryable, accept=accept, ended=bool(failure and failure.source == "peer"),
        peer=peer_failure(tail) is not None, line=tail[-1] if tail else kind.reason[:_LINE], tail=tuple(tail),
        log=(failure.log_file if failure else "")[-200:], score=result.hang_score,
    )  # fmt: skip
