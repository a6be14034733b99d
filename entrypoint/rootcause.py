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
   SIGHUP, and SIGKILL once a teardown had escalated to it or under msrun, which kills peers with SIGKILL) is
   collateral: it is never the root cause while any other rank failed.
3. Rank facts beat the launcher's own exit: a launcher is the root cause only when no rank failure is known.
4. When the job was stopped from outside (the shim got a signal), teardown-signal deaths alone name no root
   cause.
5. Among the candidates, the earliest death wins (time of death as observed: the watch, the launcher's line);
   a fact without a time ranks after timed ones of the same class, the launcher's summary before other
   untimed facts, then the order of recording.
"""


import signal
from typing import Any, Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Tuple

__all__ = ["SOURCES", "Death", "RootCause", "attempt_facts", "find_root_cause", "teardown_signals"]

SOURCES = ("exit", "watch", "summary", "error_file")
_TIME_UNKNOWN = float("inf")
_SOURCE_RANK = {"summary": 0, "watch": 1, "exit": 1, "error_file": 2}
_CODE_TRUST = {"watch": 0, "exit": 0, "summary": 1, "error_file": 2}
_DEATH_FIELDS = ("source", "index", "rank", "pid", "code", "at", "seq", "message", "attempt")


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
    ) -> None:
        self.source, self.index, self.rank, self.pid, self.code = source, index, rank, pid, code
        self.at, self.seq, self.message, self.attempt = at, seq, message, attempt

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


def teardown_signals(launcher_kills: bool, escalated: bool) -> FrozenSet[int]:
    """Signals whose deaths are collateral: the usual stop signals, and SIGKILL when it was used to end peers."""
    sigs = {int(signal.SIGTERM), int(signal.SIGINT), int(signal.SIGHUP)}
    if launcher_kills or escalated:
        sigs.add(int(signal.SIGKILL))
    return frozenset(sigs)


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
                seq=min(f.seq for f in group),
                code=best.code if best.code is not None else (1 if any(f.message for f in group) else None),
            )
        )
    return merged + others


def _order(fact: Death) -> Tuple[float, int, int]:
    return (fact.at if fact.at is not None else _TIME_UNKNOWN, _SOURCE_RANK[fact.source], fact.seq)


def find_root_cause(
    facts: Sequence[Death], collateral_signals: FrozenSet[int], *, stopped: bool = False
) -> Optional[RootCause]:
    """The root cause among ``facts`` (see the module docstring), or None when nothing failed.

    ``stopped``: the job was stopped from outside (the shim got a signal); then deaths by teardown signals
    alone name no root cause.
    """
    failed = [f for f in _merge(facts) if f.code is not None and f.code != 0]
    if not failed:
        return None
    pool = [f for f in failed if f.rank is not None] or failed
    primary = [f for f in pool if f.signal is None or f.signal not in collateral_signals]
    if stopped and not primary:
        return None
    chosen = min(primary or pool, key=_order)
    collateral = tuple(f for f in pool if f is not chosen and f not in primary)
    return RootCause(chosen, collateral)
