"""The coordinator's messages: one typed record each, and the one place that reads them off the wire. Pure.

Every proved line (:mod:`.wire`) carries one JSON object whose ``t`` names its type. :func:`parse` turns such an
object into its record, refusing a malformed field with :class:`~.wire.WireError` (kind ``malformed``, naming
the message, the field and the value); each record's ``to_wire`` makes the object again. A type this shim does
not know parses to None and is ignored, as before. ``seq`` is the channel's, never a record's.

=============  ===========  ==================================================  ===================================
message        sent by      when                                                fields
=============  ===========  ==================================================  ===================================
``challenge``  coordinator  first on every connection (the only unproved line;  ``v``, ``nonce``
                            :func:`.wire.challenge`, :func:`.wire.read_challenge`)
``hello``      host         its first proved line                               ``host``, ``addr``, ``last``,
                                                                                [``log``, ``prepared``]
``prepared``   host         its prepare steps ended (``cause`` None: they all   ``cause``
                            succeeded; else the step that failed)
``welcome``    coordinator  the answer to a hello                               ``hosts``, ``attempt``
``hb``         both         every ``interval`` seconds (heartbeat)              (none)
``start``      coordinator  every host starts attempt ``attempt``               ``attempt``, ``cause``,
                                                                                [``members``, ``free``]
``failing``    host         its attempt is ending after a failure of its own    ``attempt``, [``hold``]
``silent``     host         its ranks went silent, or spoke again (hangs)       ``attempt``, ``silent``
``end``        coordinator  another host failed, was lost or joined, or every   ``attempt``, ``host``, ``addr``,
                            host is silent: this host's attempt ends            ``why``
``over``       host         its attempt ended (``cause`` None: it succeeded)    ``attempt``, ``cause``
``finish``     coordinator  the job is over: exit with ``code``                 ``code``, ``cause``, ``attempt``
=============  ===========  ==================================================  ===================================

A ``cause`` is a :class:`Cause` (an attempt's root cause as a host told it, or as the coordinator chose it) or
null; ``members`` is :func:`members_text`'s text; ``why`` one of :class:`Why`. Integers are JSON integers
(never ``true``/``false``), strings JSON strings. A field not sent takes its record's default.

``prepared`` in a hello is false while the host still runs its prepare steps (``MALAUNCH_PREPARE``); a hello
without it (a shim with no steps) is a prepared host. The coordinator starts no attempt with a host that has not
prepared (:mod:`.jobstate`).

The hello carries no incarnation: whether the shim behind a host's new connection is the one that joined before
or a new one changes nothing the coordinator decides (a new connection replaces the old one either way, and
``last`` tells which attempt the host ran), so none is sent.
"""

from __future__ import annotations

import enum
import json
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Tuple, Union

from .members import members_text, read_members
from .wire import MAX_LINE, WireError, text

__all__ = [
    "Cause", "End", "Failing", "Finish", "Heartbeat", "Hello", "Message", "Over", "Prepared", "Silent", "Start",
    "Welcome", "Why", "parse",
]  # fmt: skip

_ADDR_MAX = 300  # an address as a message names it, at most (a longer one is shortened)


class Cause(NamedTuple):
    """An attempt's root cause, as a host tells it (``over``) or the coordinator chose it (``start``, ``finish``).

    Absent facts are None, an empty string or False, never a placeholder."""

    host: Optional[int] = None  # the host whose attempt it ended (the coordinator sets it from the connection)
    addr: str = ""  # that host's address
    rank: Optional[int] = None  # the rank that failed, if one did
    name: str = ""  # the process's name (``rank 3``, ``torchrun``)
    code: Optional[int] = None  # its exit code
    signal: Optional[int] = None  # the signal that ended it
    kind: Optional[str] = None  # its failure class (``signal``, ``user_error``, ``host_lost``, ...)
    retryable: bool = False  # the class is retryable
    accept: bool = False  # ``restart_on`` accepts it (judged by the host that failed)
    peer: bool = False  # its log says a peer failed (gloo's ``Connection closed by peer``)
    ended: bool = False  # the attempt ended on the coordinator's word, not by a failure of its own
    line: str = ""  # the line that says it
    tail: Tuple[str, ...] = ()  # the last lines of its log
    log: str = ""  # its log file
    score: Optional[int] = None  # a hung attempt: how strong the evidence of its ranks is (0-7)

    def to_wire(self) -> Dict[str, Any]:
        """The cause as JSON (every field; the report's ``job_cause`` is this)."""
        return {**self._asdict(), "tail": list(self.tail)}

    @classmethod
    def from_wire(cls, value: object, where: str) -> Optional[Cause]:
        """The cause of a message's field (``where`` names it); None for null. Raises :class:`WireError`."""
        if value is None:
            return None
        if not isinstance(value, dict):
            raise _malformed(where, "is not an object", value)
        read = _Fields(value, where)
        return cls(
            host=read.opt_whole("host"), addr=read.string("addr"), rank=read.opt_whole("rank"),
            name=read.string("name"), code=read.opt_whole("code"), signal=read.opt_whole("signal"),
            kind=read.opt_string("kind"), retryable=read.flag("retryable"), accept=read.flag("accept"),
            peer=read.flag("peer"), ended=read.flag("ended"), line=read.string("line"), tail=read.lines("tail"),
            log=read.string("log"), score=read.opt_whole("score"),
        )  # fmt: skip


class Why(enum.Enum):
    """Why the coordinator ends a host's attempt (``end``)."""

    FAILED = "failed"  # another host's attempt failed
    LOST = "lost"  # another host was lost
    HUNG = "hung"  # every host's ranks are silent
    JOINED = "joined"  # elastic: a host joined, the next attempt takes it in


class Hello(NamedTuple):
    """A host joins: its index, its address (None: the coordinator uses the connection's), its last attempt, its
    log folder (a lost host's cause names it), and whether its prepare steps are done."""

    host: int
    addr: Optional[str] = None
    last: int = -1  # the last attempt this host ran (-1: none)
    log: str = ""  # its log folder (MALAUNCH_LOG_DIR), "" when not said
    prepared: bool = True  # False: it still runs its prepare steps (a ``prepared`` follows)

    def to_wire(self) -> Dict[str, Any]:
        payload = {"t": "hello", "host": self.host, "addr": self.addr, "last": self.last, "log": self.log}
        return payload if self.prepared else {**payload, "prepared": False}


class Prepared(NamedTuple):
    """A host's prepare steps ended: ``cause`` None when every step succeeded, else the step that failed (class
    ``prepare_failed``): the job ends with it."""

    cause: Optional[Cause]

    def to_wire(self) -> Dict[str, Any]:
        return {"t": "prepared", "cause": _cause_wire(self.cause)}


class Welcome(NamedTuple):
    """The coordinator took a hello: the job's hosts and its attempt now (-1: none started yet)."""

    hosts: int
    attempt: int

    def to_wire(self) -> Dict[str, Any]:
        return {"t": "welcome", "hosts": self.hosts, "attempt": self.attempt}


class Heartbeat(NamedTuple):
    """Still here (both ways)."""

    def to_wire(self) -> Dict[str, Any]:
        return {"t": "hb"}


class Start(NamedTuple):
    """Every host starts attempt ``attempt``; ``cause`` is the previous attempt's root cause."""

    attempt: int
    cause: Optional[Cause]
    members: Optional[Tuple[int, ...]] = None  # elastic (MALAUNCH_MIN_HOSTS): the attempt's hosts
    free: bool = False  # elastic: started for a change of membership (not charged to MA_MAX_RESTARTS)

    def to_wire(self) -> Dict[str, Any]:
        """The message; one that would not fit a wire line (thousands of hosts lost here and there in
        ``members``) sends its cause's line without the tail."""
        payload: Dict[str, Any] = {"t": "start", "attempt": self.attempt, "cause": _cause_wire(self.cause)}
        if self.members is None:
            return payload
        payload.update(members=members_text(self.members), free=self.free)
        cause = self.cause
        if cause is None:
            return payload

        if len(json.dumps(payload, separators=(",", ":"))) <= MAX_LINE - 128:
            return payload
        return dict(payload, cause=cause._replace(tail=(cause.line[:300],)).to_wire())


class Failing(NamedTuple):
    """A host's attempt is ending after a failure of its own; ``hold`` > 0: its log says a peer failed, and it
    holds its stop that long (the coordinator holds the others' end as long, at most ``HOLD_MAX``)."""

    attempt: int
    hold: float = 0.0

    def to_wire(self) -> Dict[str, Any]:
        if self.hold > 0:
            return {"t": "failing", "attempt": self.attempt, "hold": round(self.hold, 3)}
        return {"t": "failing", "attempt": self.attempt}


class Silent(NamedTuple):
    """A host's ranks went silent (``silent``) or spoke again in attempt ``attempt`` (hang detection)."""

    attempt: int
    silent: bool

    def to_wire(self) -> Dict[str, Any]:
        return {"t": "silent", "attempt": self.attempt, "silent": self.silent}


class End(NamedTuple):
    """This host's attempt ``attempt`` ends, because of ``host`` (None: every host, hung)."""

    attempt: int
    host: Optional[int]
    addr: str
    why: Why

    def to_wire(self) -> Dict[str, Any]:
        return {"t": "end", "attempt": self.attempt, "host": self.host, "addr": self.addr, "why": self.why.value}


class Over(NamedTuple):
    """A host's attempt ended; ``cause`` is its root cause (None: its ranks succeeded)."""

    attempt: int
    cause: Optional[Cause]

    def to_wire(self) -> Dict[str, Any]:
        return {"t": "over", "attempt": self.attempt, "cause": _cause_wire(self.cause)}


class Finish(NamedTuple):
    """The job is over: every host exits with ``code``, naming ``cause``; ``attempt`` was its last."""

    code: int
    cause: Optional[Cause]
    attempt: int

    def to_wire(self) -> Dict[str, Any]:
        return {"t": "finish", "code": self.code, "cause": _cause_wire(self.cause), "attempt": self.attempt}


Message = Union[Hello, Welcome, Heartbeat, Start, Failing, Silent, End, Over, Finish, Prepared]


def parse(payload: Mapping[str, Any]) -> Optional[Message]:
    """The record of a proved payload (see the table above); None for a type this shim does not know.
    Raises :class:`WireError` (``malformed``) for a field of the wrong type or value."""
    kind = payload.get("t")
    reader = _READERS.get(kind) if isinstance(kind, str) else None
    if reader is None:
        return None
    return reader(_Fields(payload, f"a {kind!r} message's"))


def _hello(read: _Fields) -> Hello:
    prepared = read.raw("prepared")
    if prepared is not None and not isinstance(prepared, bool):
        raise _malformed(read.where, "'prepared' is not true or false", prepared)
    return Hello(read.whole("host"), read.opt_string("addr", _ADDR_MAX), read.whole("last", -1),
                 read.opt_string("log", _ADDR_MAX) or "", prepared is not False)


def _welcome(read: _Fields) -> Welcome:
    return Welcome(read.whole("hosts"), read.whole("attempt"))


def _start(read: _Fields) -> Start:
    members = read.raw("members")
    found = read_members(members) if members is not None else None
    if members is not None and found is None:
        raise _malformed(read.where, "'members' is not a list of hosts", members)
    return Start(read.whole("attempt"), read.cause("cause"), found, read.flag("free"))


def _failing(read: _Fields) -> Failing:
    return Failing(read.whole("attempt"), read.number("hold"))


def _silent(read: _Fields) -> Silent:
    silent = read.raw("silent")
    if not isinstance(silent, bool):
        raise _malformed(read.where, "'silent' is not true or false", silent)
    return Silent(read.whole("attempt"), silent)


def _end(read: _Fields) -> End:
    why = read.raw("why")
    try:
        reason = Why(why)
    except ValueError:
        raise _malformed(read.where, f"'why' is not one of {', '.join(w.value for w in Why)}", why) from None
    return End(read.whole("attempt"), read.opt_whole("host"), text(read.string("addr"), _ADDR_MAX) or "", reason)


def _over(read: _Fields) -> Over:
    return Over(read.whole("attempt"), read.cause("cause"))


def _finish(read: _Fields) -> Finish:
    return Finish(read.whole("code"), read.cause("cause"), read.whole("attempt"))


def _prepared(read: _Fields) -> Prepared:
    return Prepared(read.cause("cause"))


_READERS: Dict[str, Callable[[_Fields], Message]] = {
    "hello": _hello, "welcome": _welcome, "hb": lambda read: Heartbeat(), "start": _start, "failing": _failing,
    "silent": _silent, "end": _end, "over": _over, "finish": _finish, "prepared": _prepared,
}  # fmt: skip


class _Fields:
    """Typed reads of one JSON object's fields; a field absent (or null, where null is allowed) is its default."""

    def __init__(self, data: Mapping[str, Any], where: str) -> None:
        self.data, self.where = data, where

    def raw(self, name: str) -> object:
        return self.data.get(name)

    def whole(self, name: str, default: Optional[int] = None) -> int:
        value = self.data.get(name, default)
        if not _is_int(value):
            raise _malformed(self.where, f"{name!r} is not an integer", value)
        assert isinstance(value, int)
        return value

    def opt_whole(self, name: str) -> Optional[int]:
        value = self.data.get(name)
        if value is not None and not _is_int(value):
            raise _malformed(self.where, f"{name!r} is not an integer", value)
        return value

    def number(self, name: str) -> float:
        value = self.data.get(name, 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _malformed(self.where, f"{name!r} is not a number", value)
        return float(value)

    def flag(self, name: str) -> bool:
        value = self.data.get(name, False)
        if not isinstance(value, bool):
            raise _malformed(self.where, f"{name!r} is not true or false", value)
        return value

    def string(self, name: str) -> str:
        value = self.data.get(name, "")
        if not isinstance(value, str):
            raise _malformed(self.where, f"{name!r} is not a string", value)
        return value

    def opt_string(self, name: str, limit: Optional[int] = None) -> Optional[str]:
        value = self.data.get(name)
        if value is not None and not isinstance(value, str):
            raise _malformed(self.where, f"{name!r} is not a string", value)
        return text(value, limit) if value is not None and limit is not None else value

    def lines(self, name: str) -> Tuple[str, ...]:
        value = self.data.get(name, [])
        if not isinstance(value, list) or not all(isinstance(line, str) for line in value):
            raise _malformed(self.where, f"{name!r} is not a list of strings", value)
        return tuple(value)

    def cause(self, name: str) -> Optional[Cause]:
        return Cause.from_wire(self.data.get(name), f"{self.where} {name!r}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _malformed(where: str, what: str, value: object) -> WireError:
    shown = repr(value)
    return WireError("malformed", f"{where} {what}: {shown if len(shown) <= 60 else shown[:57] + '...'}")


def _cause_wire(cause: Optional[Cause]) -> Optional[Dict[str, Any]]:
    return cause.to_wire() if cause is not None else None
