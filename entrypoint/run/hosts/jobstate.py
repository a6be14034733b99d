"""The job's state as the coordinator keeps it: who is here, which attempt runs, how it ended. Pure.

:class:`JobState` is fed what the coordinator hears (a host joined or left, a host's attempt is failing or is
over, time passed) and answers with the messages to send (:class:`Send`). It holds O(hosts) state and never
blocks. The rules (docs/recovery.md, "Multi-host"):

1. Attempt 0 starts when every host has joined (a host that ran attempts before, under a coordinator that was
   lost, brings its last attempt: the job goes on after it). Hosts missing after ``join_wait``: the job ends
   with exit 3.
2. The first host that says its attempt is failing, or a host that is lost while an attempt runs, ends the
   attempt on every other host (``end``). The attempt is over when every host still here said how it ended.
2a. A host whose failure's log says a peer failed (gloo's ``Connection closed by peer``) holds its own stop up
   to :data:`HOLD_MAX` s (``failing`` with ``hold``), so that the peer that really failed dies by itself and is
   recorded; the others are ended when that hold is over (a host whose ranks all died says its attempt is
   over meanwhile: that changes nothing), or at once when a host fails without such evidence or is lost.
2b. Hang detection (``MALAUNCH_HANG_TIMEOUT``): each host says when its ranks went silent and when they speak
   again (:meth:`JobState.silent`). Once every host whose account of the attempt is awaited is silent, the
   attempt is hung: every one of them gets ``end`` with ``why: hung`` and ends its attempt with class ``hang``.
   One host silent while another's ranks print is not a hang.
3. The attempt's root cause is chosen from what the hosts said, never from who spoke first alone: a failure of
   the host's own ranks before a lost host, before a failure whose log says a peer failed, before an attempt
   ended on the coordinator's word; within each, a hung host with stronger evidence (``score``: a rank stopped,
   a zombie, in disk wait, spinning) first, then the earliest.
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
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Set, Tuple

from ...report.rootcause import PEER_WINDOW
from .wire import MAX_LINE

__all__ = ["EXIT_HOST_LOST", "HOLD_MAX", "Cause", "JobState", "Send", "lost_cause", "members_text", "read_members"]

#: The shim's exit code when a lost host did not come back (retryable: the platform's job restart takes over).
EXIT_HOST_LOST = 75
EXIT_NO_JOIN = 3
#: The longest a host's ``failing`` may hold the others' end (rule 2a): a shim's own hold, at most.
HOLD_MAX = PEER_WINDOW
_OWN, _LOST, _PEER, _ENDED = range(4)  # cause priorities, best first

Cause = Dict[str, Any]  # JSON: host, addr, rank, code, signal, kind, retryable, accept, peer, ended, line, tail


class Send(NamedTuple):
    """A message for one host (``to``), or for every host here (``to`` None)."""

    to: Optional[int]
    payload: Dict[str, Any]


def lost_cause(host: int, addr: str, why: str, accept: bool) -> Cause:
    """The cause naming a lost host (class ``host_lost``, retryable)."""
    line = f"ma-entrypoint: host {host} ({addr}) lost: {why}"
    return {"host": host, "addr": addr, "rank": None, "code": EXIT_HOST_LOST, "signal": None,
            "kind": "host_lost", "retryable": True, "accept": accept, "peer": False, "ended": False, "line": line,
            "tail": [line]}  # fmt: skip


_PACKED = "z:"  # members as a bitmap (bit i: host i), zlib-packed, in base64
_RANGES_MAX = 2000  # longer ranges (hosts lost here and there) travel packed
_PACKED_MAX = 3000  # 16,384 hosts in no order at all: 2,048 bytes that do not pack, 2,750 characters
_BITMAP_MAX = 2048  # bytes: MA_NUM_HOSTS is at most 16,384


def members_text(members: Tuple[int, ...]) -> str:
    """Host indexes as ranges (``0-3,5``), or packed (``z:...``) when the ranges would be long (hosts lost here
    and there): a start message stays within a wire line however many hosts the job has."""
    runs: List[List[int]] = []
    for host in sorted(set(members)):
        if runs and runs[-1][1] == host - 1:
            runs[-1][1] = host
        else:
            runs.append([host, host])
    text = ",".join(str(low) if low == high else f"{low}-{high}" for low, high in runs)
    if len(text) <= _RANGES_MAX:
        return text
    import base64
    import zlib

    bits = bytearray((max(members) >> 3) + 1)
    for host in members:
        bits[host >> 3] |= 1 << (host & 7)
    return _PACKED + base64.b64encode(zlib.compress(bytes(bits), 9)).decode("ascii")


def read_members(text: object) -> Optional[Tuple[int, ...]]:
    """The hosts of :func:`members_text`'s text; None when it is not one."""
    if isinstance(text, str) and text.startswith(_PACKED) and len(text) <= _PACKED_MAX:
        return _unpack(text[len(_PACKED) :])
    if not isinstance(text, str) or not text or len(text) > _RANGES_MAX:
        return None
    found: List[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or not (high.isdigit() or not high):
            return None
        first, last = int(low), int(high or low)
        if last < first or last - first > 100000:
            return None
        found += range(first, last + 1)
    return tuple(sorted(set(found)))


def _unpack(text: str) -> Optional[Tuple[int, ...]]:
    import base64
    import binascii
    import zlib

    try:
        unpacker = zlib.decompressobj()
        bits = unpacker.decompress(base64.b64decode(text, validate=True), _BITMAP_MAX + 1)
    except (binascii.Error, ValueError, zlib.error):
        return None
    if len(bits) > _BITMAP_MAX or unpacker.unconsumed_tail or not unpacker.eof:
        return None
    found = tuple(index * 8 + bit for index, byte in enumerate(bits) for bit in range(8) if byte >> bit & 1)
    return found or None


def _fitting(payload: Dict[str, Any]) -> Dict[str, Any]:
    """A start message that fits a wire line: the previous cause keeps its line, not its tail, when the members
    take the room (thousands of hosts, lost here and there)."""
    import json

    cause = payload.get("cause")
    if not cause or len(json.dumps(payload, separators=(",", ":"))) <= MAX_LINE - 128:
        return payload
    return dict(payload, cause=dict(cause, tail=[str(cause.get("line") or "")[:300]]))


def _priority(cause: Cause) -> int:
    if cause.get("kind") == "host_lost":
        return _LOST
    if cause.get("ended"):
        return _ENDED
    return _PEER if cause.get("peer") else _OWN


class JobState:
    """The coordinator's book of one job (see the module's docstring for the rules)."""

    def __init__(self, num_hosts: int, max_restarts: int, lost_accepted: bool, backoff: Callable[[int], float],
                 host_wait: float, join_wait: float, now: float, min_hosts: Optional[int] = None) -> None:  # fmt: skip
        self.num_hosts, self.max_restarts, self.lost_accepted = num_hosts, max_restarts, lost_accepted
        self.backoff, self.host_wait = backoff, host_wait
        self.here: Dict[int, Tuple[object, str]] = {}  # host -> (its connection, its address)
        self.attempt = -1
        self.seen = -1  # the latest attempt a joining host says it ran
        self.phase = "joining"  # running, ending, waiting, backoff, done
        self.pending: Set[int] = set()  # hosts whose account of the attempt is awaited
        self.causes: List[Tuple[int, int, Cause]] = []
        self.lost: Dict[int, Cause] = {}  # hosts lost and not back, with their cause
        self.deadline = now + join_wait  # joining: give up; waiting: the lost host's time; backoff: start
        self.final: Optional[Tuple[int, Optional[Cause]]] = None
        self.verdicts: List[Optional[Cause]] = []  # each attempt's root cause, in order
        self.quiet: Set[int] = set()  # hosts whose ranks are silent in the running attempt (hang detection)
        self.min_hosts = min_hosts  # elastic (rule 5): the fewest hosts an attempt may start with; None: all
        self.members: Tuple[int, ...] = ()  # the hosts of the running (or last) attempt
        self.dropped: Set[int] = set()  # members lost during the running attempt
        self.rejoined = False  # elastic: a host joined while the attempt ran without it
        self.free = 0  # attempts started for a change of membership (not charged to max_restarts)
        self.free_next = False  # the next attempt is one of them
        self.held: Optional[Tuple[Optional[int], float]] = None  # rule 2a: (the holding host, until when)

    # -- what the coordinator hears ---------------------------------------------------------------------------
    def join(self, host: int, conn: object, addr: str, last: int, now: float) -> List[Send]:
        """Host ``host`` joined on ``conn``; ``last``: the last attempt it ran (-1: none)."""
        out: List[Send] = []
        if host in self.here:
            out += self.leave(host, self.here[host][0], "a new shim joined in its place", now)
        self.here[host] = (conn, addr)
        self.lost.pop(host, None)
        self.seen = max(self.seen, last)
        out.append(Send(host, {"t": "welcome", "hosts": self.num_hosts, "attempt": self.attempt}))
        if self.final is not None:
            out.append(Send(host, _finish_message(self.final, self.attempt)))
        elif self.min_hosts is not None and self.phase in ("running", "ending") and host not in self.members:
            out += self._take_in(host, addr)
        return out + self.advance(now)

    def leave(self, host: int, conn: object, why: str, now: float) -> List[Send]:
        """The connection ``conn`` of ``host`` is gone (closed, silent, refused)."""
        if self.here.get(host, (None,))[0] is not conn:
            return []  # an older connection of a host that came back
        addr = self.here.pop(host)[1]
        cause = lost_cause(host, addr, why, self.lost_accepted)
        self.lost[host] = cause
        if self.phase in ("running", "ending") and host in self.members:
            self.dropped.add(host)
        out: List[Send] = []
        if self.phase in ("running", "ending") and host in self.pending:
            self.pending.discard(host)
            out += self._failed(cause, now)
        return out + self.advance(now)

    def failing(self, host: int, attempt: int, now: float, hold: float = 0.0) -> List[Send]:
        """Host ``host``'s attempt is ending after a failure of its own (its account comes with :meth:`over`);
        ``hold``: its log says a peer failed, and it holds its stop that long (rule 2a)."""
        if attempt != self.attempt or self.phase != "running":
            return []
        if hold > 0:
            if self.held is None:
                self.held = (host, now + min(hold, HOLD_MAX))
            return []
        return self._end_others(host, now)

    def silent(self, host: int, attempt: int, silent: bool, now: float) -> List[Send]:
        """Host ``host``'s ranks went silent (``silent``) or spoke again in attempt ``attempt`` (rule 2b)."""
        del now
        if attempt != self.attempt or self.phase != "running":
            return []
        (self.quiet.add if silent else self.quiet.discard)(host)
        if not self.pending or not self.pending <= self.quiet:
            return []
        self.phase = "ending"
        payload = {"t": "end", "attempt": self.attempt, "host": None, "addr": "", "why": "hung"}
        return [Send(other, payload) for other in sorted(self.pending)]

    def over(self, host: int, attempt: int, cause: Optional[Cause], now: float) -> List[Send]:
        """Host ``host``'s attempt ended: ``cause`` is its root cause (None: its ranks succeeded)."""
        if attempt != self.attempt or host not in self.pending:
            return []
        self.pending.discard(host)
        out = self._failed(dict(cause, host=host), now) if cause is not None else []
        return out + self.advance(now)

    # -- time -------------------------------------------------------------------------------------------------
    def advance(self, now: float) -> List[Send]:
        """Move on as far as the hosts and the clock allow."""
        if self.phase == "joining":
            if len(self.here) == self.num_hosts:
                return self._start(self.seen + 1, now)
            if now >= self.deadline and self._enough():
                return self._start(self.seen + 1, now)
            if now >= self.deadline:
                missing = ", ".join(str(h) for h in range(self.num_hosts) if h not in self.here)
                line = (f"ma-entrypoint: gave up waiting for host(s) {missing} to join the job's coordinator; "
                        "check that every host started and can reach the master host")  # fmt: skip
                return self._finish(EXIT_NO_JOIN, {"host": None, "addr": "", "rank": None, "code": EXIT_NO_JOIN,
                                                   "kind": "rendezvous_timeout", "line": line, "tail": [line]})
        elif self.phase in ("running", "ending") and not self.pending:
            return self._decide(now)
        elif self.phase == "running" and self.held is not None and now >= self.held[1]:
            return self._end_others(self.held[0], now)
        elif self.phase == "waiting":
            if len(self.here) == self.num_hosts:
                pause = 0.0 if self.free_next else self.backoff(self.attempt + 1 - self.free)
                self.phase, self.deadline = "backoff", now + pause
                return self.advance(now)
            if now >= self.deadline and self._enough():
                return self._start(self.attempt + 1, now)  # elastic: on without the hosts still lost
            if now >= self.deadline:
                return self._finish(EXIT_HOST_LOST, _gone(self.lost, self.host_wait))
        elif self.phase == "backoff":
            if (len(self.here) < self.num_hosts) if self.min_hosts is None else not self._enough():
                self.phase, self.deadline = "waiting", now + self.host_wait
            elif now >= self.deadline:
                return self._start(self.attempt + 1, now)
        return []

    # -- inside -------------------------------------------------------------------------------------------------
    def _start(self, attempt: int, now: float) -> List[Send]:
        previous = self.verdicts[-1] if self.verdicts else None
        free, self.free_next = self.free_next, False
        self.free += int(free)
        if attempt - self.free > self.max_restarts and attempt > 0:
            line = (f"ma-entrypoint: the job's restarts are spent ({self.max_restarts}): it cannot start attempt "
                    f"{attempt}")  # fmt: skip
            return self._finish(EXIT_HOST_LOST, dict(previous or {}, code=EXIT_HOST_LOST, line=line, tail=[line]))
        self.attempt, self.phase = attempt, "running"
        self.pending = set(self.here)
        self.causes, self.quiet, self.held = [], set(), None
        self.members, self.dropped, self.rejoined = tuple(sorted(self.here)), set(), False
        payload: Dict[str, Any] = {"t": "start", "attempt": attempt, "cause": previous}
        if self.min_hosts is not None:
            payload.update(members=members_text(self.members), free=free)
            payload = _fitting(payload)
        return [Send(None, payload)]

    def _failed(self, cause: Cause, now: float) -> List[Send]:
        score = cause.get("score")  # a hung attempt: the host whose ranks show the strongest evidence first
        self.causes.append((_priority(cause) * 8 - (score if isinstance(score, int) and 0 <= score < 8 else 0),
                            len(self.causes), cause))  # fmt: skip
        if self.phase != "running" or (self.held is not None and cause.get("peer") and not cause.get("ended")):
            return []  # rule 2a: an account that says a peer failed leaves the hold as it is
        return self._end_others(cause.get("host"), now)

    def _end_others(self, host: Optional[int], now: float) -> List[Send]:
        del now
        self.phase, self.held = "ending", None
        addr = self.here.get(host, (None, "?"))[1] if host is not None else "?"
        if host in self.lost:
            addr = self.lost[host]["addr"]
        word = "lost" if host in self.lost else "failed"
        payload = {"t": "end", "attempt": self.attempt, "host": host, "addr": addr, "why": word}
        return [Send(other, payload) for other in sorted(self.pending) if other != host]

    def _decide(self, now: float) -> List[Send]:
        if not self.causes:  # every host's ranks succeeded (a host lost after saying so changes nothing)
            self.verdicts.append(None)
            return self._finish(0, None)
        cause = min(self.causes, key=lambda item: (item[0], item[1]))[2]
        self.verdicts.append(cause)
        if self.min_hosts is not None and (self.dropped or self.rejoined):  # rule 5: a change of membership
            self.free_next = True
            self.phase, self.deadline = "waiting", now + (self.host_wait if self.dropped else 0.0)
            return self.advance(now)
        again = bool(cause.get("accept")) and self.attempt - self.free < self.max_restarts
        if not again:
            return self._finish(int(cause.get("code") or 1), cause)
        return self._after_loss(cause, now)

    def _after_loss(self, cause: Cause, now: float) -> List[Send]:
        if self.min_hosts is not None:  # elastic, a failure (charged): hosts lost before are not waited for again
            self.phase, self.deadline = "backoff", now + self.backoff(self.attempt + 1 - self.free)
            return self.advance(now)
        if self.lost and not self.lost_accepted:  # the next attempt needs a host the job may not wait for
            named = cause if cause.get("kind") == "host_lost" else _gone(self.lost, self.host_wait)
            return self._finish(EXIT_HOST_LOST, named)
        self.phase, self.deadline = "waiting", now + self.host_wait
        return self.advance(now)

    def _enough(self) -> bool:
        """Elastic: the hosts here may start an attempt (at least ``min_hosts``, the master among them)."""
        return self.min_hosts is not None and 0 in self.here and len(self.here) >= self.min_hosts

    def _take_in(self, host: int, addr: str) -> List[Send]:
        """Elastic: ``host`` joined while the attempt runs without it: the attempt ends, the next takes it in."""
        self.rejoined = True
        if self.phase != "running":
            return []
        self.phase = "ending"
        payload = {"t": "end", "attempt": self.attempt, "host": host, "addr": addr, "why": "joined"}
        return [Send(other, payload) for other in sorted(self.pending)]

    def _finish(self, code: int, cause: Optional[Cause]) -> List[Send]:
        self.phase, self.final = "done", (code, cause)
        return [Send(None, _finish_message(self.final, self.attempt))]


def _gone(lost: Dict[int, Cause], host_wait: float) -> Cause:
    """The cause naming the first host still lost once its time to come back ran out."""
    cause = dict(lost[min(lost)])
    line = f"{cause['line']}; it did not come back within {host_wait:g} s"
    return dict(cause, line=line, tail=[line])


def _finish_message(final: Tuple[int, Optional[Cause]], attempt: int) -> Dict[str, Any]:
    return {"t": "finish", "code": final[0], "cause": final[1], "attempt": attempt}
