"""The job's state as the coordinator keeps it: who is here, which attempt runs, how it ended. Pure.

:class:`JobState` is fed what the coordinator hears (a host joined or left, a host's attempt is failing or is
over, time passed) and answers with the messages to send (:class:`Send`, records of :mod:`.messages`). It holds
O(hosts) state and never blocks. Its state is named: the job's :class:`Phase`, its fixed :class:`Rules`, the
hosts here, lost and preparing (:class:`~.roster.Roster`), the running attempt (:class:`Round`) and the verdict
of every attempt so far. The rules (docs/recovery.md, "Multi-host"):

1. Attempt 0 starts when every host has joined (a host that ran attempts before, under a coordinator that was
   lost, brings its last attempt: the job goes on after it). Hosts missing after ``join_wait``: the job ends
   with exit 3.
2. The first host that says its attempt is failing, or a host that is lost while an attempt runs, ends the
   attempt on every other host (``end``). The attempt is over when every host still here said how it ended.
2a. A host whose failure's log says a peer failed (gloo's ``Connection closed by peer``) holds its own stop up
   to :data:`HOLD_MAX` s (``failing`` with ``hold``), so that the peer that really failed dies by itself and is
   recorded; the others are ended when that hold is over (a host whose ranks all died says its attempt is
   over meanwhile: that changes nothing), or at once when a host fails without such evidence or is lost.
2b. Hang detection (``MALAUNCH_HANG_TIMEOUT``): each host says when its ranks went silent, when they speak
   again, and when they all exited while its launcher winds down (``ended``: torchrun's agent in its exit
   barrier, which may last minutes; :meth:`JobState.silent`). Once every host whose account of the attempt is
   awaited is silent or ended, at least one silent, the attempt is hung: every one of them gets ``end`` with
   ``why: hung``; a silent host ends its attempt with class ``hang``, an ended one as ended on the coordinator's
   word (so the hung host is the root cause). A host whose attempt is over (its ranks succeeded) is no longer
   awaited. One host silent while another's ranks print is not a hang.
3. The attempt's root cause is chosen from what the hosts said, never from who spoke first alone: a failure of
   the host's own ranks before a lost host, before a failure whose log says a peer failed, before an attempt
   ended on the coordinator's word; within each, a hung host with stronger evidence (``score``: a rank stopped,
   a zombie, in disk wait, spinning) first, then the earliest. Hung hosts whose evidence is equal (their ranks
   all wait: who reported first is no fact about the hang) give the lowest rank they name, and the cause's
   ``why`` (the coordinator's own words, apart from its rank's output) says the evidence was equal (:func:`_root`).
4. If ``restart_on`` accepts the cause (the failing host judged it; a lost host: :attr:`lost_accepted`) and the
   job's budget allows (attempt K < ``max_restarts``), every host starts attempt K+1 together after the
   back-off, once every host is here again: a lost host has ``host_wait`` seconds to come back, else the job
   ends with :data:`EXIT_HOST_LOST` naming it. Otherwise the job ends with the cause's exit code (``finish``).
5. Elastic (``min_hosts``, torchrun's ``MALAUNCH_MIN_HOSTS``): each ``start`` names the attempt's ``members``
   (:func:`members_text`). An attempt a member was lost from is a change of membership, whatever its root
   cause and ``restart_on``: the lost host has ``host_wait`` seconds to come back, then the next attempt starts
   with the hosts here if they are at least ``min_hosts`` (else :data:`EXIT_HOST_LOST`). A host that joins
   while an attempt runs without it ends that attempt (``end`` with ``why: joined``) and the next one takes it
   in. Attempts started for a change of membership are not charged to ``max_restarts`` (:attr:`JobState.free`).
   A failure's restart (charged) starts after the back-off with the hosts here, at least ``min_hosts``.
6. Prepare steps (``MALAUNCH_PREPARE``): a host that joins before its steps are done (its hello says so) is here
   but not ready (:attr:`JobState.preparing`); every rule above that counts the hosts here counts the ready ones,
   so attempt 0 (and the attempt a replaced host joins) starts on every host together once all have prepared.
   A host that is here and preparing is never given up on by a deadline (its own ``MALAUNCH_PREPARE_TIMEOUT``
   bounds it). A host whose steps failed (``prepared`` with a cause) ends the job with that cause.
7. Checkpoints (:mod:`.saves`): every ``start`` names the newest checkpoint the hosts completed together
   (:attr:`JobState.resume`, kept by the coordinator's :class:`~.saves.SaveBook`), which every host's ranks resume
   from; none before the first. A coordinator that replaced a lost one learns it from the hosts' hellos: each
   names the newest checkpoint it heard complete (a ``saved``, or a ``start``'s ``resume``), and the newest of
   them is the job's (:meth:`~.saves.SaveBook.heard`; every one was complete on every host's part when a
   coordinator of this job said so; a host that missed it writes its marker or refuses, as after any ``start``).
"""

from __future__ import annotations

import enum
from typing import Callable, Dict, List, NamedTuple, Optional, Set, Tuple

from ...report.rootcause import PEER_WINDOW
from .members import members_text
from .messages import Cause, End, Finish, Message, Resume, Start, Welcome, Why
from .roster import EXIT_HOST_LOST, Roster

__all__ = ["EQUAL_EVIDENCE", "EXIT_HOST_LOST", "HOLD_MAX", "Hold", "JobState", "Phase", "Round", "Rules", "Send"]

EXIT_NO_JOIN = 3
#: The longest a host's ``failing`` may hold the others' end (rule 2a): a shim's own hold, at most.
HOLD_MAX = PEER_WINDOW
#: How the coordinator's ``why`` of a hang's root cause chosen among equal evidence begins (:func:`_root`).
EQUAL_EVIDENCE = "the hung hosts' evidence is equal"
_HOSTS_LISTED = 8  # a ``why`` names up to this many tied hosts one by one, more by their ranges
_RANGES_SAID = 200  # ... and by their number alone when the ranges are longer (hosts here and there)
_OWN, _LOST, _PEER, _ENDED = range(4)  # cause priorities, best first


class Phase(enum.Enum):
    """Where the job is; :attr:`JobState.deadline` is what the phase waits for at most."""

    JOINING = "joining"  # the hosts join (deadline: give up, exit 3)
    RUNNING = "running"  # an attempt runs
    ENDING = "ending"  # the attempt ends on every host: their accounts are awaited
    WAITING = "waiting"  # a lost host may come back (deadline: its time is over)
    BACKOFF = "backoff"  # the next attempt starts at the deadline
    DONE = "done"  # the job's finish is sent


class Send(NamedTuple):
    """A message for one host (``to``), or for every host here (``to`` None)."""

    to: Optional[int]
    message: Message


class Rules(NamedTuple):
    """What the book is told once, for the job's life."""

    num_hosts: int
    max_restarts: int
    lost_accepted: bool  # restart_on accepts a lost host (class host_lost)
    backoff: Callable[[int], float]  # the pause before restart K
    host_wait: float  # how long a lost host may take to come back
    min_hosts: Optional[int] = None  # elastic (rule 5): the fewest hosts an attempt may start with; None: all


class Hold(NamedTuple):
    """Rule 2a: a host whose failure's log says a peer failed holds the others' end until ``until``."""

    host: Optional[int]
    until: float


class Round:
    """The running (or last) attempt as the book follows it."""

    __slots__ = ("causes", "dropped", "ended", "held", "members", "number", "pending", "quiet", "rejoined")

    def __init__(self, number: int = -1, members: Tuple[int, ...] = ()) -> None:
        self.number = number  # the attempt (-1: none started yet)
        self.members = members  # its hosts
        self.pending: Set[int] = set(members)  # hosts whose account of the attempt is awaited
        self.causes: List[Tuple[int, int, Cause]] = []  # (priority, order, cause) of each failure told
        self.quiet: Set[int] = set()  # hosts whose ranks are silent (hang detection)
        self.ended: Set[int] = set()  # hosts whose ranks all exited, their launchers winding down (hang detection)
        self.dropped: Set[int] = set()  # members lost during the attempt
        self.rejoined = False  # elastic: a host joined while the attempt ran without it
        self.held: Optional[Hold] = None  # rule 2a


def _priority(cause: Cause) -> int:
    if cause.kind == "host_lost":
        return _LOST
    if cause.ended:
        return _ENDED
    return _PEER if cause.peer else _OWN


def _weight(cause: Cause) -> int:
    """A failure's place among its attempt's causes, lowest first: its priority, then (a hung attempt) the host
    whose ranks show the strongest evidence."""
    score = cause.score
    return _priority(cause) * 8 - (score if score is not None and 0 <= score < 8 else 0)


class JobState:
    """The coordinator's book of one job (see the module's docstring for the rules)."""

    def __init__(self, num_hosts: int, max_restarts: int, lost_accepted: bool, backoff: Callable[[int], float],
                 host_wait: float, join_wait: float, now: float, min_hosts: Optional[int] = None) -> None:  # fmt: skip
        self.rules = Rules(num_hosts, max_restarts, lost_accepted, backoff, host_wait, min_hosts)
        self.phase = Phase.JOINING
        self.deadline = now + join_wait  # what the phase waits for at most (see Phase)
        self.hosts = Roster()  # who is here, lost, preparing (rule 6)
        self.round = Round()
        self.verdicts: List[Optional[Cause]] = []  # each attempt's root cause, in order
        self.free = 0  # attempts started for a change of membership (not charged to max_restarts)
        self.free_next = False  # the next attempt is one of them
        self.final: Optional[Finish] = None  # the job's end, once decided
        self.resume: Optional[Resume] = None  # the newest checkpoint the hosts completed (rule 7)

    @property
    def num_hosts(self) -> int:
        return self.rules.num_hosts

    @property
    def attempt(self) -> int:
        """The running (or last) attempt; -1 before the first."""
        return self.round.number

    # -- what the coordinator hears ---------------------------------------------------------------------------
    def join(self, host: int, conn: object, addr: str, last: int, now: float, log: str = "",
             prepared: bool = True) -> List[Send]:  # fmt: skip
        """Host ``host`` joined on ``conn``; ``last``: the last attempt it ran (-1: none); ``log``: its log folder;
        ``prepared``: its prepare steps are done (rule 6)."""
        out: List[Send] = []
        if host in self.hosts.here:
            out += self.leave(host, self.hosts.conn(host), "a new shim joined in its place", now)
        self.hosts.join(host, conn, addr, last, log, prepared)
        out.append(Send(host, Welcome(self.rules.num_hosts, self.attempt)))
        if self.final is not None:
            out.append(Send(host, self.final))
        elif prepared and self.rules.min_hosts is not None and self._in_attempt() and host not in self.round.members:
            out += self._take_in(host, addr)
        return out + self.advance(now)

    def prepared(self, host: int, cause: Optional[Cause], now: float) -> List[Send]:
        """Host ``host``'s prepare steps ended: ``cause`` None when they succeeded, else the job ends with it."""
        if host not in self.hosts.here or self.final is not None:
            return []
        if cause is not None:
            cause = cause._replace(host=host)
            return self._finish(int(cause.code or 1), cause)
        self.hosts.preparing.discard(host)
        out: List[Send] = []
        if self.rules.min_hosts is not None and self._in_attempt() and host not in self.round.members:
            out += self._take_in(host, self.hosts.addr(host))
        return out + self.advance(now)

    def leave(self, host: int, conn: object, why: str, now: float) -> List[Send]:
        """The connection ``conn`` of ``host`` is gone (closed, silent, refused)."""
        if self.hosts.conn(host) is not conn:
            return []  # an older connection of a host that came back
        cause = self.hosts.leave(host, why, self.rules.lost_accepted)
        if self._in_attempt() and host in self.round.members:
            self.round.dropped.add(host)
        out: List[Send] = []
        if self._in_attempt() and host in self.round.pending:
            self.round.pending.discard(host)
            out += self._failed(cause, now)
        return out + self.advance(now)

    def failing(self, host: int, attempt: int, now: float, hold: float = 0.0) -> List[Send]:
        """Host ``host``'s attempt is ending after a failure of its own (its account comes with :meth:`over`);
        ``hold``: its log says a peer failed, and it holds its stop that long (rule 2a)."""
        if attempt != self.attempt or self.phase is not Phase.RUNNING:
            return []
        if hold > 0:
            if self.round.held is None:
                self.round.held = Hold(host, now + min(hold, HOLD_MAX))
            return []
        return self._end_others(host, now)

    def silent(self, host: int, attempt: int, silent: bool, now: float, ended: bool = False) -> List[Send]:
        """Host ``host``'s ranks went silent (``silent``), spoke again, or all exited while its launcher winds
        down (``ended``) in attempt ``attempt`` (rule 2b)."""
        del now
        if attempt != self.attempt or self.phase is not Phase.RUNNING:
            return []
        (self.round.quiet.add if silent else self.round.quiet.discard)(host)
        (self.round.ended.add if ended and not silent else self.round.ended.discard)(host)
        return self._hung()

    def _hung(self) -> List[Send]:
        """Rule 2b: every awaited host silent or ended, one at least silent: each gets ``end`` (hung)."""
        pending, quiet = self.round.pending, self.round.quiet
        if self.phase is not Phase.RUNNING or not pending & quiet or not pending <= quiet | self.round.ended:
            return []
        self.phase = Phase.ENDING
        message = End(self.attempt, None, "", Why.HUNG)
        return [Send(other, message) for other in sorted(pending)]

    def over(self, host: int, attempt: int, cause: Optional[Cause], now: float) -> List[Send]:
        """Host ``host``'s attempt ended: ``cause`` is its root cause (None: its ranks succeeded)."""
        if attempt != self.attempt or host not in self.round.pending:
            return []
        self.round.pending.discard(host)
        out = self._failed(cause._replace(host=host), now) if cause is not None else self._hung()
        return out + self.advance(now)

    # -- time -------------------------------------------------------------------------------------------------
    def advance(self, now: float) -> List[Send]:
        """Move on as far as the hosts and the clock allow."""
        rules, phase, hosts = self.rules, self.phase, self.hosts
        if phase is Phase.JOINING:
            if hosts.ready() == rules.num_hosts or (now >= self.deadline and hosts.enough(rules.min_hosts)):
                return self._start(hosts.seen + 1, now)
            if now >= self.deadline and len(hosts.here) < rules.num_hosts:  # here and preparing: not given up on
                return self._finish(EXIT_NO_JOIN, _no_join(hosts.missing(rules.num_hosts)))
        elif self._in_attempt() and not self.round.pending:
            return self._decide(now)
        elif phase is Phase.RUNNING and self.round.held is not None and now >= self.round.held.until:
            return self._end_others(self.round.held.host, now)
        elif phase is Phase.WAITING:
            if hosts.ready() == rules.num_hosts:
                pause = 0.0 if self.free_next else rules.backoff(self.attempt + 1 - self.free)
                self.phase, self.deadline = Phase.BACKOFF, now + pause
                return self.advance(now)
            if now >= self.deadline and hosts.enough(rules.min_hosts):
                return self._start(self.attempt + 1, now)  # elastic: on without the hosts still lost
            if now >= self.deadline and len(hosts.here) < rules.num_hosts:
                return self._finish(EXIT_HOST_LOST, _gone(hosts.lost, rules.host_wait))
        elif phase is Phase.BACKOFF:
            if (hosts.ready() < rules.num_hosts) if rules.min_hosts is None else not hosts.enough(rules.min_hosts):
                self.phase, self.deadline = Phase.WAITING, now + rules.host_wait
            elif now >= self.deadline:
                return self._start(self.attempt + 1, now)
        return []

    # -- inside -------------------------------------------------------------------------------------------------
    def _in_attempt(self) -> bool:
        return self.phase is Phase.RUNNING or self.phase is Phase.ENDING

    def _start(self, attempt: int, now: float) -> List[Send]:
        previous = self.verdicts[-1] if self.verdicts else None
        free, self.free_next = self.free_next, False
        self.free += int(free)
        if attempt - self.free > self.rules.max_restarts and attempt > 0:
            return self._finish(EXIT_HOST_LOST, _spent(previous, self.rules.max_restarts, attempt))
        self.phase = Phase.RUNNING
        self.round = Round(attempt, self.hosts.ready_hosts())
        if self.rules.min_hosts is None:
            return [Send(None, Start(attempt, previous, resume=self.resume))]
        return [Send(None, Start(attempt, previous, self.round.members, free, self.resume))]

    def _failed(self, cause: Cause, now: float) -> List[Send]:
        self.round.causes.append((_weight(cause), len(self.round.causes), cause))
        if self.phase is not Phase.RUNNING or (self.round.held is not None and cause.peer and not cause.ended):
            return []  # rule 2a: an account that says a peer failed leaves the hold as it is
        return self._end_others(cause.host, now)

    def _end_others(self, host: Optional[int], now: float) -> List[Send]:
        del now
        self.phase, self.round.held = Phase.ENDING, None
        message = End(self.attempt, host, self.hosts.addr(host), Why.LOST if host in self.hosts.lost else Why.FAILED)
        return [Send(other, message) for other in sorted(self.round.pending) if other != host]

    def _decide(self, now: float) -> List[Send]:
        if not self.round.causes:  # every host's ranks succeeded (a host lost after saying so changes nothing)
            self.verdicts.append(None)
            return self._finish(0, None)
        cause = _root(self.round.causes)
        self.verdicts.append(cause)
        if self.rules.min_hosts is not None and (self.round.dropped or self.round.rejoined):  # rule 5
            self.free_next = True
            self.phase, self.deadline = Phase.WAITING, now + (self.rules.host_wait if self.round.dropped else 0.0)
            return self.advance(now)
        again = cause.accept and self.attempt - self.free < self.rules.max_restarts
        if not again:
            return self._finish(int(cause.code or 1), cause)
        return self._after_loss(cause, now)

    def _after_loss(self, cause: Cause, now: float) -> List[Send]:
        rules = self.rules
        if rules.min_hosts is not None:  # elastic, a failure (charged): hosts lost before are not waited for again
            self.phase, self.deadline = Phase.BACKOFF, now + rules.backoff(self.attempt + 1 - self.free)
            return self.advance(now)
        if self.hosts.lost and not rules.lost_accepted:  # the next attempt needs a host the job may not wait for
            named = cause if cause.kind == "host_lost" else _gone(self.hosts.lost, rules.host_wait)
            return self._finish(EXIT_HOST_LOST, named)
        self.phase, self.deadline = Phase.WAITING, now + rules.host_wait
        return self.advance(now)

    def _take_in(self, host: int, addr: str) -> List[Send]:
        """Elastic: ``host`` joined while the attempt runs without it: the attempt ends, the next takes it in."""
        self.round.rejoined = True
        if self.phase is not Phase.RUNNING:
            return []
        self.phase = Phase.ENDING
        message = End(self.attempt, host, addr, Why.JOINED)
        return [Send(other, message) for other in sorted(self.round.pending)]

    def _finish(self, code: int, cause: Optional[Cause]) -> List[Send]:
        self.phase, self.final = Phase.DONE, Finish(code, cause, self.attempt)
        return [Send(None, self.final)]


def _root(causes: List[Tuple[int, int, Cause]]) -> Cause:
    """The attempt's root cause among ``causes`` (rule 3): the lowest weight, then the earliest; but when hung
    hosts (class ``hang``) tie on the lowest weight, the order they reported in says nothing about the hang: the
    lowest rank they name (then the lowest host) is the cause, its account as the host told it, and its ``why``
    (the coordinator's own words, never a line of the rank's output) says the evidence was equal."""
    weight, _, cause = min(causes, key=lambda item: (item[0], item[1]))
    tied = [other for mass, _, other in causes if mass == weight and other.kind == "hang"]
    if cause.kind != "hang" or len({other.host for other in tied}) < 2:
        return cause
    hosts = sorted({other.host for other in tied if other.host is not None})
    return min(tied, key=_rank_order)._replace(why=f"{EQUAL_EVIDENCE} ({_hosts_said(hosts)}): the lowest rank they "
                                                   "name is the job's root cause, not the one of the host that "
                                                   "reported first")  # fmt: skip


def _hosts_said(hosts: List[int]) -> str:
    """``hosts 0, 1`` for a few, ``1000 hosts: 0-999`` for many (a wire line holds it however many there are)."""
    if len(hosts) <= _HOSTS_LISTED:
        return f"hosts {', '.join(map(str, hosts))}"
    listed = members_text(tuple(hosts))
    return f"{len(hosts)} hosts" + (f": {listed}" if len(listed) <= _RANGES_SAID else "")


def _rank_order(cause: Cause) -> Tuple[int, int, int]:
    """Equal evidence (:func:`_root`): the lowest rank first, a cause naming none last, then the lowest host."""
    host = cause.host if cause.host is not None else -1
    return (0, cause.rank, host) if cause.rank is not None else (1, 0, host)


def _no_join(missing: List[int]) -> Cause:
    """The cause of a job whose hosts ``missing`` did not join in time."""
    line = (f"ma-entrypoint: gave up waiting for host(s) {', '.join(map(str, missing))} to join the job's "
            "coordinator; check that every host started and can reach the master host")  # fmt: skip
    return Cause(host=None, addr="", rank=None, code=EXIT_NO_JOIN, kind="rendezvous_timeout", line=line, tail=(line,))


def _spent(previous: Optional[Cause], max_restarts: int, attempt: int) -> Cause:
    """The cause of a job that cannot start ``attempt``: its restarts are spent. The previous cause when there is
    one, as it was (its own code: the job's is the finish's); else one that says so."""
    if previous is not None:
        return previous
    line = f"ma-entrypoint: the job's restarts are spent ({max_restarts}): it cannot start attempt {attempt}"
    return Cause(code=EXIT_HOST_LOST, line=line, tail=(line,))


def _gone(lost: Dict[int, Cause], host_wait: float) -> Cause:
    """The cause naming the first host still lost once its time to come back ran out."""
    cause = lost[min(lost)]
    line = f"{cause.line}; it did not come back within {host_wait:g} s"
    return cause._replace(line=line, tail=(line,))
