"""The attempt loop of a host in a multi-host job: the coordinator says which attempt runs, and when it ends.

Where :func:`~..attempts.run_with_restarts` decides alone on one host, here every decision is the job's:

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
"""

from __future__ import annotations

import signal
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ...contract.errors import LaunchError
from ...plan.launch_plan import LaunchPlan
from ...report.report import Failure, RunResult
from .. import notify
from ..attempts import RestartOutcome, _Announcer, _BackoffStop, _Loop
from ..events import Event
from ..launcher import Launcher
from ..policy import RestartPolicy, backoff_for, should_restart
from . import HostsConfig
from .jobstate import EXIT_HOST_LOST, JobState
from .link import Finish, Gone, HostLink, Start
from .server import Coordinator
from .wire import job_key

__all__ = ["membership_event", "run_coordinated"]

_TAIL = 5
_LINE = 160


class _AttemptSide:
    """The link as one attempt's supervisor sees it (:class:`~..events.AttemptLink`)."""

    def __init__(self, link: HostLink, attempt: int) -> None:
        self.link, self.attempt = link, attempt

    def attach(self, post: Optional[Callable[[Event], None]]) -> None:
        self.link.attach(post)

    def failing(self, hold: float = 0.0) -> None:
        self.link.failing(self.attempt, hold)

    def silent(self, silent: bool) -> None:
        self.link.silent(self.attempt, silent)


def serve(config: HostsConfig, max_restarts: int, policy: RestartPolicy, say: Callable[[str], None]) -> Coordinator:
    """Start the job's coordinator (the master host's shim). Raises :class:`LaunchError` if the port is taken."""
    from ...report.failure_class import classify_failure

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
                    say: Callable[[str], None], launcher: Launcher, config: HostsConfig) -> RestartOutcome:  # fmt: skip
    """Run ``plan``'s attempts as the job's coordinator says (see the module's docstring)."""
    from ..procs import selfproc

    started = time.monotonic()
    stop = _BackoffStop()
    loop = _Loop(plan, policy, launcher, say)
    announce = _Announcer(plan, launcher.announces_attempts(_plan_policy(policy, config)))
    with selfproc.stop_signal_handlers(stop.on_signal):
        server = serve(config, loop.limit - 1, policy, say) if config.host == 0 else None
        link = HostLink(job_key(config.secret), config.host, config.addr, "127.0.0.1" if server else config.master,
                        config.port, config.interval, config.heartbeat_timeout, config.join_wait, config.host_wait,
                        say).start()  # fmt: skip
        try:
            return _Drive(plan, base_env, policy, run, loop, link, config, announce, stop, started).go()
        finally:
            link.close()
            if server is not None:
                server.close()


class _Drive:
    def __init__(self, plan: LaunchPlan, base_env: Mapping[str, str], policy: RestartPolicy,
                 run: Callable[..., RunResult], loop: _Loop, link: HostLink, config: HostsConfig,
                 announce: _Announcer, stop: _BackoffStop, started: float) -> None:  # fmt: skip
        self.plan, self.base_env, self.policy, self.run, self.loop = plan, base_env, policy, run, loop
        self.link, self.config, self.announce, self.stop, self.started = link, config, announce, stop, started
        self.result: Optional[RunResult] = None
        self.hosts: Dict[str, Any] = {"host": config.host, "num_hosts": config.num_hosts, "master": config.master,
                                      "port": config.port, "secret_given": config.secret_given}  # fmt: skip
        self.plan_policy = _plan_policy(policy, config)
        if config.min_hosts is not None:
            self.hosts.update(min_hosts=config.min_hosts, membership=[])

    def go(self) -> RestartOutcome:
        while True:
            command = self.link.next_command(lambda seconds: self.stop.wait(seconds) is not None)
            if command is None:
                return self._stopped()
            if isinstance(command, Start):
                if not self._attempt(command):
                    return self._outcome(self._own_result())
                continue
            if isinstance(command, Gone):
                self.announce(max(self.link.last_attempt, 0), "ended")
                line = f"ma-entrypoint: host 0 ({self.config.master}) lost: {command.why}"
                return self._outcome(self._final(EXIT_HOST_LOST, {"host": 0, "addr": self.config.master,
                                                                   "kind": "host_lost", "retryable": True,
                                                                   "line": line, "tail": [line]}))  # fmt: skip
            return self._finish(command)

    def _attempt(self, command: Start) -> bool:
        """Run attempt K; False when this host was stopped during it (it leaves the job now)."""
        if self.loop.attempts:
            last = self.loop.attempts[-1]
            last.restarted, last.cause = True, command.cause
            self.loop.say(_restart_line(last.index, command, self.policy))
            notify.attempt_over(self.loop.attempts)
        index = command.attempt
        attempt_plan = self.loop.launcher.plan_attempt(self.plan, index, self.plan_policy)
        if command.members is not None:
            attempt_plan = self.loop.launcher.plan_members(attempt_plan, index, len(command.members))
            self._membership(command)
        for note in attempt_plan.notes[len(self.plan.notes):]:
            self.loop.say(note)
        self.link.last_attempt = index
        self.announce(index, "running")
        self.result = self.run(attempt_plan, self.base_env, link=_AttemptSide(self.link, index))
        kind = self.loop.record(index, self.result, attempt_plan.log_dir)
        if command.members is not None:
            self.loop.attempts[-1].members = command.members
            self.loop.attempts[-1].world_size = len(command.members) * self.config.procs_per_host
        self.link.over(index, _cause(self.result, kind, self.policy, self.config) if kind is not None else None)
        if self.result.shim_signal is not None:
            self.announce(index, "ended")
            return False
        self.announce(index, "backoff" if kind is not None else "ended")
        return True

    def _membership(self, command: Start) -> None:
        """Elastic: note attempt K's hosts, and the change from the attempt before (an event in the report)."""
        assert command.members is not None
        events: List[Dict[str, Any]] = self.hosts["membership"]
        before = events[-1]["members"] if events else list(range(self.config.num_hosts))
        event = membership_event(command.attempt, before, command.members, self.config.procs_per_host,
                                 command.free)  # fmt: skip
        if event is not None:
            events.append(event)
            self.loop.say(event["line"])

    def _finish(self, command: Finish) -> RestartOutcome:
        if self.loop.attempts:
            self.loop.attempts[-1].cause = command.cause
        self.announce(max(self.link.last_attempt, 0), "ended")
        if command.code == 0 and self.result is not None:
            return self._outcome(self._own_result(), None)
        return self._outcome(self._final(command.code, command.cause or {}))

    def _final(self, code: int, cause: Dict[str, Any]) -> RunResult:
        own = self.result.root_cause if self.result is not None else None
        duration = time.monotonic() - self.started
        if cause.get("host") == self.config.host and own is not None and own.source != "peer":
            return RunResult(code, own, None, duration)
        host = cause.get("host")
        line = str(cause.get("line") or f"host {host} failed")
        failure = Failure(name=str(cause.get("name") or f"host {host}"), rank=_int(cause.get("rank")),
                          local_rank=None, host=str(cause.get("addr") or f"host {host}"), pid=None, exit_code=code,
                          signal=_int(cause.get("signal")), log_file=str(cause.get("log") or ""),
                          tail=tuple(str(t) for t in cause.get("tail") or [line])[-_TAIL:], source="peer",
                          why=f"host {host} reported it to the job's coordinator")  # fmt: skip
        return RunResult(code, failure, None, duration)

    def _own_result(self) -> RunResult:
        assert self.result is not None
        return self.result._replace(duration=time.monotonic() - self.started)

    def _stopped(self) -> RestartOutcome:
        signum = self.stop.signum or signal.SIGTERM
        self.loop.say(f"received {signal.Signals(signum).name} while waiting for the other hosts: stopping, "
                      "no further attempt")  # fmt: skip
        self.announce(max(self.link.last_attempt, 0), "ended")
        final = RunResult(128 + signum, None, signum, time.monotonic() - self.started)
        return RestartOutcome(final, tuple(self.loop.attempts), self.policy, stopped_in_backoff=signum,
                              hosts=self.hosts)  # fmt: skip

    def _outcome(self, final: RunResult, cause: Optional[Dict[str, Any]] = None) -> RestartOutcome:
        from ...report.failure_class import Classification, classify_failure

        job_class = None
        if final.exit_code != 0 and final.shim_signal is None and final.root_cause is not None:
            found = classify_failure(final.exit_code, final.root_cause.tail, signal=final.root_cause.signal)
            kind = (cause or {}).get("kind")
            job_class = Classification(kind, found.retryable, found.reason) if kind == found.kind else found
        return RestartOutcome(final, tuple(self.loop.attempts), self.policy, hosts=self.hosts, job_class=job_class)


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


def _restart_line(index: int, command: Start, policy: RestartPolicy) -> str:
    cause = command.cause or {}
    if command.free:
        return (f"attempt {index} of the job ended with a change of its hosts: every host here starts attempt "
                f"{command.attempt} now")  # fmt: skip
    who = f"rank {cause['rank']}" if isinstance(cause.get("rank"), int) else "it"
    return (f"attempt {index} of the job failed on host {cause.get('host')} ({who}, exit {cause.get('code')}, "
            f"{cause.get('kind')}): every host starts attempt {command.attempt} of {policy.max_restarts} now")


def _cause(result: RunResult, kind: Any, policy: RestartPolicy, config: HostsConfig) -> Dict[str, Any]:
    """This host's account of a failed attempt, for the coordinator (small: a few short lines)."""
    from ...report.failure_class import peer_failure

    failure = result.root_cause
    accept = result.shim_signal is None and should_restart(policy, kind, result.exit_code)
    tail = [line[:_LINE] for line in (failure.tail if failure is not None else ())][-_TAIL:]
    return {
        "addr": config.addr, "rank": failure.rank if failure else None, "name": failure.name if failure else "",
        "code": result.exit_code, "signal": failure.signal if failure else None, "kind": kind.kind,
        "retryable": kind.retryable, "accept": accept, "ended": bool(failure and failure.source == "peer"),
        "peer": peer_failure(tail) is not None, "line": tail[-1] if tail else kind.reason[:_LINE], "tail": tail,
        "log": (failure.log_file if failure else "")[-200:], "score": result.hang_score,
    }  # fmt: skip


def _int(value: object) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
