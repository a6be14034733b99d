"""Root cause from recorded facts: typed events in, one decision out, no processes and no clock.

The supervisor records what it learns as :class:`Death` facts, each from one source:

- ``"exit"``: a process the shim started ended (its own wait status). Under the fan-out these are the ranks;
  under torchrun/msrun the launcher's own exit (torchrun always exits 1) is a fact about the launcher only.
- ``"watch"``: a launcher's worker (a direct child of the launcher carrying a rank) was seen dead as a zombie,
  before the launcher reaped it.
- ``"summary"``: torchrun's "Root Cause (first observed failure)" entry, or msrun's "Worker process <pid> exit
  with exception. Error code: N" line: the launcher's own record of the first failure it saw.
- ``"error_file"``: a worker's ``TORCHELASTIC_ERROR_FILE`` (written by ``@record``): the rank failed with an
  exception; it carries the message, not the exit code.

:func:`find_root_cause` then decides, in this order:

1. Only failures count (exit code != 0). Facts about the same rank are merged (the earliest time, the first
   known exit code, the error message).
2. A death by a *teardown signal* (a signal the shim or the launcher sends to end the group: SIGTERM, SIGINT,
   SIGHUP, and SIGKILL once the shim's teardown had escalated to it) is collateral: it is never the root cause
   while any other rank failed. A launcher that kills the peers itself (``launcher_kills``: msrun, which SIGKILLs
   the other workers right after logging the failed one) makes SIGKILL collateral only once it has said so (a
   ``"summary"`` fact is among the facts: it logs its line *before* it kills), and never for the worker its line
   names: that one died before the launcher's teardown. Without such a line the launcher killed nobody, and a
   SIGKILL came from elsewhere (out of memory, from outside).
3. Rank facts beat the launcher's own exit: a launcher is the root cause only when no rank failure is known. A
   launcher's line about one of its workers is a rank fact even when its rank is unknown (see
   :func:`name_ranks`: msrun names a pid, and a worker that lived too briefly for the watch has no known rank).
4. When the job was stopped from outside (the shim got a signal), teardown-signal deaths alone name no root
   cause.
5. Among the candidates, the earliest death wins (time of death as observed: the watch, the launcher's line);
   a fact without a time ranks after timed ones of the same class, the launcher's summary before other
   untimed facts, then the order of recording.
6. Deaths the shim could not order are ordered by evidence. Two deaths are unordered when their observed times
   are within :data:`SAME_LOOK` of each other (seen in the same look, or seen late together after the shim
   was held up) or when either has no time (known only from a launcher's summary or an error file). A death
   whose ``evidence`` (set from its log tail or error file: a peer or collective failure,
   :func:`~.failure_class.peer_failure`) says it failed *because of a peer* never outranks an unordered death
   without such evidence. Evidence also beats order within a window: a death without such evidence up to
   :data:`PEER_WINDOW` s *after* a death with it, and before the teardown's stop signal went out
   (``teardown_at``: until then it died by itself), is not ordered behind it either: the peer's socket
   closed as it began to exit, and its own process took that long to end. Other deaths seen in order keep that
   order, and a death without peer evidence (a native crash, ``terminate called after throwing``) is never
   demoted for its signal: this is no "exit codes before signals" rule. :attr:`RootCause.why` says which rule
   decided, naming the evidence.
"""


import signal
from typing import Any, Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Sequence, Tuple

__all__ = [
    "PEER_WINDOW",
    "SAME_LOOK",
    "SOURCES",
    "Death",
    "RootCause",
    "attempt_facts",
    "find_root_cause",
    "name_ranks",
    "teardown_signals",
]

SOURCES = ("exit", "watch", "summary", "error_file")
_TIME_UNKNOWN = float("inf")
_SOURCE_RANK = {"summary": 0, "watch": 1, "exit": 1, "error_file": 2}
_CODE_TRUST = {"watch": 0, "exit": 0, "summary": 1, "error_file": 2}
_DEATH_FIELDS = ("source", "index", "rank", "pid", "code", "at", "seq", "message", "attempt", "evidence")
#: Deaths observed closer together than this (seconds) cannot be told apart in time: the shim's waiters and
#: the watch may wake in either order after a stall, and torchrun itself reaps at a 0.1 s interval.
SAME_LOOK = 0.1
#: A death whose log says a peer failed comes after that peer's failure, but the peer's process may take longer
#: to die (Python's exit with torch's teardown, a process group torn down; seconds on a busy machine): a death
#: without such words up to this many seconds after it, and before the teardown's stop signal went out, is not
#: ordered behind it. The supervisor holds the teardown's stop signal as long (within the grace period; a failure
#: without such words ends the hold), so that peer dies by itself and is seen; in a multi-host job the
#: coordinator holds the other hosts' end as long (:mod:`...run.hosts.jobstate`, rule 2a).
PEER_WINDOW = 5.0


class Death:
    """One recorded fact: a process (or rank) of the job ended.

    ``code`` is Popen-style (negative: killed by that signal); None when the source does not know it (an error
    file). ``at`` is the monotonic time of death as observed, None when unknown. ``index`` is the plan process
    the fact came through (the launcher, or the rank's own process under the fan-out).

    A slotted class (a named tuple cannot have a field called ``index``): facts are made while the ranks start,
    and a class like this costs nothing to define. Facts are never changed; :meth:`replace` makes a copy.
    """

    __slots__ = _DEATH_FIELDS

    def __init__(
        self,
        source: str,
        index: int,
        rank: Optional[int],
        pid: Optional[int],
        code: Optional[int],
        at: Optional[float] = None,
        seq: int = 0,  # order of recording, the last tie-breaker
        message: Optional[str] = None,  # the exception an error file recorded
        attempt: Optional[int] = None,  # the launcher's own attempt (torchrun restarts), None: not attempt-specific
        evidence: Optional[str] = None,  # the peer/collective failure its log or error file names, if any
    ) -> None:
        self.source, self.index, self.rank, self.pid, self.code = source, index, rank, pid, code
        self.at, self.seq, self.message, self.attempt, self.evidence = at, seq, message, attempt, evidence

    def _fields(self) -> Dict[str, Any]:
        return {name: getattr(self, name) for name in _DEATH_FIELDS}

    def replace(self, **changes: Any) -> "Death":
        """A copy with ``changes`` applied."""
        return Death(**{**self._fields(), **changes})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Death) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(tuple(self._fields().values()))

    def __repr__(self) -> str:
        return "Death(" + ", ".join(f"{name}={value!r}" for name, value in self._fields().items()) + ")"

    @property
    def signal(self) -> Optional[int]:
        """The signal that killed it, if any."""
        return -self.code if self.code is not None and self.code < 0 else None


class RootCause(NamedTuple):
    """The decision: which fact names the root cause, and the merged facts about that rank."""

    death: Death
    collateral: Tuple[Death, ...]  # failures judged to be consequences of the teardown
    why: str = ""  # the rule that decided, with the evidence it used


def teardown_signals(launcher_kills: bool, escalated: bool) -> FrozenSet[int]:
    """Signals whose deaths may be collateral: the usual stop signals, and SIGKILL when it was used (or, with
    ``launcher_kills``, may have been used) to end peers. :func:`find_root_cause` decides per death whether a
    launcher's SIGKILL really was its teardown's (see rule 2)."""
    sigs = {int(signal.SIGTERM), int(signal.SIGINT), int(signal.SIGHUP)}
    if launcher_kills or escalated:
        sigs.add(int(signal.SIGKILL))
    return frozenset(sigs)


def name_ranks(facts: Sequence[Death], pid_ranks: Mapping[int, int], ranks: Sequence[int]) -> List[Death]:
    """``facts`` with a rank given to each launcher line (``"summary"``) that names a worker by pid only.

    ``pid_ranks``: every worker the watch saw (pid -> rank); ``ranks``: this host's ranks, one worker each. A pid
    the watch saw has its rank. A pid it never saw (the worker lived and died between two looks of a busy
    watch) is the one rank of ``ranks`` the watch saw no worker of, when exactly one rank is unseen and exactly
    one pid unknown: msrun runs one worker per rank, so no other worker can be that pid. Otherwise the rank
    stays unknown (None).
    """
    unknown = {f.pid for f in facts if f.source == "summary" and f.rank is None and f.pid is not None}
    unknown -= set(pid_ranks)
    unseen = sorted(set(ranks) - set(pid_ranks.values()))
    guess = {pid: unseen[0] for pid in unknown} if len(unknown) == 1 and len(unseen) == 1 else {}
    named = {**guess, **pid_ranks}
    return [
        f.replace(rank=named[f.pid]) if f.source == "summary" and f.rank is None and f.pid in named else f
        for f in facts
    ]


def attempt_facts(facts: Sequence[Death], attempt: Optional[int], last: bool) -> List[Death]:
    """The facts of one launcher attempt; facts that name no attempt (the launcher's exit, its summary) belong
    to the last one (``last``)."""
    return [f for f in facts if f.attempt == attempt or (last and f.attempt is None)]


def _merge(facts: Sequence[Death]) -> List[Death]:
    """One fact per rank (earliest time, best code, message) plus the facts without a rank, in recording order.

    A rank's code comes from the watch (its wait status) when known, else from the launcher's summary, else
    from its own exit (fan-out). A fact without a code (a death seen too late to read its status) only adds
    its time; an error file marks the rank as failed even when no code is known.
    """
    by_rank: Dict[int, List[Death]] = {}
    others: List[Death] = []
    for fact in sorted(facts, key=lambda f: f.seq):
        (by_rank.setdefault(fact.rank, []) if fact.rank is not None else others).append(fact)
    merged: List[Death] = []
    for group in by_rank.values():
        coded = sorted((f for f in group if f.code is not None), key=lambda f: (_CODE_TRUST[f.source], f.seq))
        best = coded[0] if coded else min(group, key=lambda f: f.seq)
        merged.append(
            best.replace(
                at=min((f.at for f in group if f.at is not None), default=None),
                pid=next((f.pid for f in group if f.pid is not None), None),
                message=next((f.message for f in group if f.message), None),
                evidence=next((f.evidence for f in group if f.evidence), None),
                seq=min(f.seq for f in group),
                code=best.code if best.code is not None else (1 if any(f.message for f in group) else None),
            )
        )
    return merged + others


def _order(fact: Death) -> Tuple[float, int, int]:
    return (fact.at if fact.at is not None else _TIME_UNKNOWN, _SOURCE_RANK[fact.source], fact.seq)


def _unordered(first: Death, other: Death, teardown_at: Optional[float]) -> bool:
    if first.at is None or other.at is None:
        return True
    by_itself = teardown_at is None or other.at <= teardown_at + SAME_LOOK  # before the stop signal reached it
    if first.evidence and not other.evidence and 0 <= other.at - first.at <= PEER_WINDOW and by_itself:
        return True  # a death saying a peer failed comes after that failure, not after the peer's process died
    return abs(other.at - first.at) <= SAME_LOOK


def _who(fact: Death) -> str:
    return f"rank {fact.rank}" if fact.rank is not None else f"process {fact.index}"


def _pick(candidates: Sequence[Death], teardown_at: Optional[float]) -> Tuple[Death, str]:
    """The earliest candidate, unless it failed after a peer and a candidate it cannot be ordered with did not;
    and why."""
    ordered = sorted(candidates, key=_order)
    first = ordered[0]
    unordered = [f for f in ordered[1:] if _unordered(first, f, teardown_at)]
    plain = [f for f in unordered if not f.evidence]
    chosen = plain[0] if first.evidence and plain else first
    after_peer = [f for f in [first, *unordered] if f is not chosen and f.evidence]
    if after_peer:
        return chosen, f"{_who(after_peer[0])} failed after a peer: {after_peer[0].evidence!r}"
    if len(ordered) == 1:
        return chosen, "the only failure"
    if unordered:
        return chosen, "the earliest failure seen (others could not be ordered with it; none names a peer failure)"
    return chosen, "the earliest failure seen"


def _named_key(fact: Death) -> Tuple[str, Optional[int]]:
    return ("rank", fact.rank) if fact.rank is not None else ("pid", fact.pid)


def _is_collateral(
    fact: Death, signals: FrozenSet[int], launcher_kills: bool, named: FrozenSet[Tuple[str, Optional[int]]]
) -> bool:
    """Rule 2; ``named``: the workers the launcher's lines named (empty: it said nothing, so it killed nobody)."""
    if fact.signal is None or fact.signal not in signals:
        return False
    if launcher_kills and fact.signal == signal.SIGKILL:
        return bool(named) and _named_key(fact) not in named  # the named one died before the launcher's kill
    return True


def find_root_cause(
    facts: Sequence[Death],
    collateral_signals: FrozenSet[int],
    *,
    stopped: bool = False,
    launcher_kills: bool = False,
    teardown_at: Optional[float] = None,
) -> Optional[RootCause]:
    """The root cause among ``facts`` (see the module docstring), or None when nothing failed.

    ``teardown_at``: when the shim's teardown sent its stop signal (monotonic, as the facts' times; None: never,
    or unknown): a death later than that did not die by itself, and the window of rule 6 ends there.

    ``stopped``: the job was stopped from outside (the shim got a signal); then deaths by teardown signals
    alone name no root cause. ``launcher_kills``: SIGKILL is in ``collateral_signals`` because the launcher
    (msrun) kills the peers of a failed worker, not because the shim's teardown escalated to it: then a SIGKILL
    death is collateral only after the launcher's line, and never the worker that line names (rule 2).
    """
    named = frozenset(_named_key(f) for f in facts if f.source == "summary")
    failed = [f for f in _merge(facts) if f.code is not None and f.code != 0]
    if not failed:
        return None
    pool = [f for f in failed if f.rank is not None or f.source == "summary"] or failed
    primary = [f for f in pool if not _is_collateral(f, collateral_signals, launcher_kills, named)]
    if stopped and not primary:
        return None
    chosen, why = _pick(primary or pool, teardown_at)
    collateral = tuple(f for f in pool if f is not chosen and f not in primary)
    return RootCause(chosen, collateral, why)
