"""What the master host says and notes as its coordinator's book changes the job's hosts.

The coordinator (:mod:`.server`) calls a :class:`BookWatch` on its thread after each change of its book
(:class:`~.jobstate.JobState`). The watch says (a console line, ``events.jsonl``, host 0's notifications) a host
lost or back, the job's wait for a lost host (also ``attempt.json``'s ``waiting``, with its deadline, and its
end), and which hosts the job still waits for to finish their prepare steps (:func:`waiting_for_prepare`).
:class:`~.jobloop.Coordinated` hands it to the master's coordinator, with the recovery clock's view of the book
(:func:`clock_watch`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

from ...report.causetext import describe_cause, shim_line
from .. import notifier
from ..attempt_status import note_event
from .jobstate import JobState, Phase

if TYPE_CHECKING:
    from ..recovery_clock import RecoveryClock

__all__ = ["BookWatch", "clock_watch", "waiting_for_prepare"]


class BookWatch:
    """The master host says and notes what its coordinator's book does to the job's hosts when it does it (called
    on the coordinator's thread after each change): a host lost or back (a console line and ``events.jsonl``),
    the wait for a lost host (also ``attempt.json``'s ``waiting``, with its deadline)."""

    def __init__(self, log_dir: str, say: Callable[[str], None],
                 announce: Callable[[int, str, Optional[Dict[str, Any]]], None]) -> None:  # fmt: skip
        self.log_dir, self.say, self.announce = log_dir, say, announce
        self.lost: Dict[int, str] = {}  # host -> its address, as said lost
        self.waiting = False
        self.preparing: Tuple[int, ...] = ()  # the hosts said to be preparing while the job waits for them

    def __call__(self, state: JobState) -> None:
        lost = state.hosts.lost
        if state.phase is Phase.DONE:  # the job's end is sent: the hosts leave, none is lost
            return
        self._preparing(state)
        if lost.keys() != self.lost.keys():
            attempt = max(state.attempt, 0)
            for host in sorted(lost.keys() - self.lost.keys()):
                line = describe_cause(lost[host].to_wire())
                self.say(f"coordinator: {line}")
                note_event(self.log_dir, "HostLost", line, "Warning", host=host)
                notifier.host_event("host_lost", attempt, host, lost[host].addr, line)
            for host in sorted(self.lost.keys() - lost.keys()):
                addr = state.hosts.here.get(host, (None, self.lost[host]))[1]
                line = f"host {host} ({addr}) joined the job again"
                self.say(f"coordinator: {line}")
                note_event(self.log_dir, "HostBack", line, host=host)
                notifier.host_event("host_back", attempt, host, addr, line)
            self.lost = {host: cause.addr for host, cause in lost.items()}
        waiting = state.phase is Phase.WAITING and bool(lost)
        if waiting and not self.waiting:
            first = lost[min(lost)]
            left = max(0.0, state.deadline - time.monotonic())
            why = shim_line(first.line).partition(" lost: ")[2] or "its connection ended"
            line = (f"the job's hosts wait up to {left:.0f} s for host {first.host} ({first.addr}) to come back "
                    f"(lost: {why})")  # fmt: skip
            self.say(line)
            note_event(self.log_dir, "WaitingForHost", line, "Warning", host=first.host)
            self.announce(max(state.attempt, 0), "waiting", {"host": first.host, "addr": first.addr,
                                                             "why": f"lost: {why}", "until": time.time() + left})
        elif self.waiting and not waiting and state.phase is Phase.BACKOFF:
            self.announce(max(state.attempt, 0), "backoff", None)
        self.waiting = waiting

    def _preparing(self, state: JobState) -> None:
        """Say which hosts the job still waits for to prepare, each time that changes."""
        preparing = waiting_for_prepare(state)
        if preparing == self.preparing:
            return
        self.preparing = preparing
        if preparing:
            ready = state.hosts.ready()
            hosts = ", ".join(f"{host} ({state.hosts.here[host][1]})" for host in preparing[:8])
            more = f" and {len(preparing) - 8} more" if len(preparing) > 8 else ""
            self.say(f"coordinator: the job's hosts wait for host(s) {hosts}{more} to finish their prepare steps "
                     f"({ready} of {state.num_hosts} hosts ready)")  # fmt: skip


def waiting_for_prepare(state: JobState) -> Tuple[int, ...]:
    """The hosts here whose prepare steps the job waits for before its next attempt (none while one runs)."""
    if state.phase in (Phase.RUNNING, Phase.ENDING, Phase.DONE):
        return ()
    return tuple(sorted(state.hosts.preparing))


def clock_watch(clock: RecoveryClock, other: Callable[[JobState], None]) -> Callable[[JobState], None]:
    """A watch for the coordinator that calls ``other``, then tells ``clock`` (:meth:`.RecoveryClock.book`) what the
    book says of the attempts: which decided attempts failed, and whether the running one's failure was heard of."""

    def both(state: JobState) -> None:
        other(state)
        heard = state.phase is Phase.ENDING or bool(state.round.causes) or state.round.held is not None
        clock.book(state.attempt, [verdict is not None for verdict in state.verdicts], heard)

    return both
