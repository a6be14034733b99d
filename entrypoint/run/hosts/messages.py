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
                                                                                [``log``, ``prepared``,
                                                                                ``resume``]
``prepared``   host         its prepare steps ended (``cause`` None: they all   ``cause``
                            succeeded; else the step that failed)
``welcome``    coordinator  the answer to a hello                               ``hosts``, ``attempt``
``hb``         both         every ``interval`` seconds (heartbeat)              (none)
``start``      coordinator  every host starts attempt ``attempt``, resuming     ``attempt``, ``cause``,
                            from ``resume`` (:mod:`.saves`)                     [``members``, ``free``,
                                                                                ``resume``]
``failing``    host         its attempt is ending after a failure of its own    ``attempt``, [``hold``]
``silent``     host         its ranks went silent, spoke again, or all exited   ``attempt``, ``silent``,
                            while its launcher winds down (hangs)               [``ended``]
``end``        coordinator  another host failed, was lost or joined, or every   ``attempt``, ``host``, ``addr``,
                            host is silent or ended, one at least silent:       ``why``
                            this host's attempt ends
``over``       host         its attempt ended (``cause`` None: it succeeded)    ``attempt``, ``cause``
``finish``     coordinator  the job is over: exit with ``code``                 ``code``, ``cause``, ``attempt``
``parts``      host         its checkpoint folder holds these ranks' parts of   ``attempt``, ``name``, ``step``,
                            a save of ``attempt`` (:mod:`.saves`)               ``size``, ``ranks``
``saved``      coordinator  the hosts hold every rank's part of that save:      ``attempt``, ``name``, ``step``,
                            each writes its ``.complete`` (:mod:`.saves`)       ``size``
=============  ===========  ==================================================  ===================================

A ``cause`` is a :class:`Cause` (an attempt's root cause as a host told it, or as the coordinator chose it) or
null: the host's facts (its ``tail``: its rank's last lines as the host said them), and in a ``start`` or a
``finish`` the coordinator's own ``why`` (a string: how it chose among hung hosts with equal evidence; "" when
nothing needs saying), which a host shows as its shim's own line, never among the rank's lines. ``members``
and ``ranks`` are :func:`members_text`'s text; an ``end``'s ``why`` one of :class:`Why`; ``name`` a checkpoint's
folder (one path part, at most 255 characters); ``size`` the job's number of ranks (each of ``ranks`` below it).
Integers are JSON integers (never ``true``/``false``), strings JSON strings. A field not sent takes its default.
``resume`` is a :class:`Resume` (``{"name", "step"}``): in a ``start``, the newest save the coordinator said
``saved`` for; in a ``hello``, the newest this host heard of (a ``saved``, or a ``start``'s ``resume``), so that a
coordinator that replaced a lost one learns the job's resume point (:mod:`.jobstate`, rule 7).

A ``silent`` with ``ended`` true (``silent`` false) says every rank of the host exited while its launcher still
runs (torchrun's agent in its exit barrier): the host is neither silent nor speaking, and a hang elsewhere is not
waited on it.

``prepared`` in a hello is false while the host still runs its prepare steps (``MALAUNCH_PREPARE``); a hello
without it (a shim with no steps) is a prepared host. The coordinator starts no attempt with a host that has not
prepared (:mod:`.jobstate`). The hello carries no incarnation: a new connection replaces the old one whichever
shim is behind it, and ``last`` tells which attempt the host ran.
"""

from __future__ import annotations

import enum
import json
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Tuple, Union

from .cause import Cause
from .fields import Fields, malformed
from .members import members_text, read_members
from .wire import MAX_LINE, text

__all__ = [
    "Cause", "End", "Failing", "Finish", "Heartbeat", "Hello", "Message", "Over", "Parts", "Prepared", "Resume",
    "Saved", "Silent", "Start", "Welcome", "Why", "parse",
]  # fmt: skip

_ADDR_MAX = 300  # an address as a message names it, at most (a longer one is shortened)


class Why(enum.Enum):
    """Why the coordinator ends a host's attempt (``end``)."""

    FAILED = "failed"  # another host's attempt failed
    LOST = "lost"  # another host was lost
    HUNG = "hung"  # every host's ranks are silent or have ended, and one host's at least are silent
    JOINED = "joined"  # elastic: a host joined, the next attempt takes it in


class Hello(NamedTuple):
    """A host joins: its index, its address (None: the coordinator uses the connection's), its last attempt, its
    log folder (a lost host's cause names it), whether its prepare steps are done, and the newest checkpoint it
    heard the job's hosts completed together."""

    host: int
    addr: Optional[str] = None
    last: int = -1  # the last attempt this host ran (-1: none)
    log: str = ""  # its log folder (MALAUNCH_LOG_DIR), "" when not said
    prepared: bool = True  # False: it still runs its prepare steps (a ``prepared`` follows)
    resume: Optional[Resume] = None  # the newest ``saved`` (or ``start``'s ``resume``) it heard; None: none

    def to_wire(self) -> Dict[str, Any]:
        prepared = {} if self.prepared else {"prepared": False}
        return {"t": "hello", "host": self.host, "addr": self.addr, "last": self.last, "log": self.log, **prepared,
                **_resume_wire(self.resume)}


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


class Resume(NamedTuple):
    """The checkpoint an attempt resumes from, as the coordinator agreed it: its folder's name and its step."""

    name: str
    step: int


class Start(NamedTuple):
    """Every host starts attempt ``attempt``; ``cause`` is the previous attempt's root cause; ``resume`` the
    checkpoint its ranks resume from (None: the coordinator saw none complete)."""

    attempt: int
    cause: Optional[Cause]
    members: Optional[Tuple[int, ...]] = None  # elastic (MALAUNCH_MIN_HOSTS): the attempt's hosts
    free: bool = False  # elastic: started for a change of membership (not charged to MA_MAX_RESTARTS)
    resume: Optional[Resume] = None

    def to_wire(self) -> Dict[str, Any]:
        """The message; one that would not fit a wire line (thousands of hosts lost here and there in
        ``members``) sends its cause's line without the tail."""
        payload: Dict[str, Any] = {"t": "start", "attempt": self.attempt, "cause": _cause_wire(self.cause),
                                   **_resume_wire(self.resume)}  # fmt: skip
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
    """A host's ranks went silent (``silent``), spoke again, or all exited while its launcher winds down
    (``ended``; never with ``silent``) in attempt ``attempt`` (hang detection)."""

    attempt: int
    silent: bool
    ended: bool = False

    def to_wire(self) -> Dict[str, Any]:
        payload = {"t": "silent", "attempt": self.attempt, "silent": self.silent}
        return {**payload, "ended": True} if self.ended else payload


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


class Parts(NamedTuple):
    """A host's folder holds the parts of ``ranks`` (of ``size``) of checkpoint ``name``'s save of ``step``."""

    attempt: int
    name: str
    step: int
    size: int
    ranks: Tuple[int, ...]

    def to_wire(self) -> Dict[str, Any]:
        return {"t": "parts", **self._asdict(), "ranks": members_text(self.ranks)}


class Saved(NamedTuple):
    """The hosts hold every rank's part of checkpoint ``name``'s save of ``step``: each writes its marker."""

    attempt: int
    name: str
    step: int
    size: int

    def to_wire(self) -> Dict[str, Any]:
        return {"t": "saved", **self._asdict()}


Message = Union[Hello, Welcome, Heartbeat, Start, Failing, Silent, End, Over, Finish, Prepared, Parts, Saved]


def parse(payload: Mapping[str, Any]) -> Optional[Message]:
    """The record of a proved payload (see the table above); None for a type this shim does not know.
    Raises :class:`WireError` (``malformed``) for a field of the wrong type or value."""
    kind = payload.get("t")
    reader = _READERS.get(kind) if isinstance(kind, str) else None
    if reader is None:
        return None
    return reader(Fields(payload, f"a {kind!r} message's"))


def _hello(read: Fields) -> Hello:
    prepared = read.raw("prepared")
    if prepared is not None and not isinstance(prepared, bool):
        raise malformed(read.where, "'prepared' is not true or false", prepared)
    return Hello(read.whole("host"), read.opt_string("addr", _ADDR_MAX), read.whole("last", -1),
                 read.opt_string("log", _ADDR_MAX) or "", prepared is not False, _resume(read))


def _welcome(read: Fields) -> Welcome:
    return Welcome(read.whole("hosts"), read.whole("attempt"))


def _start(read: Fields) -> Start:
    members = read.raw("members")
    found = read_members(members) if members is not None else None
    if members is not None and found is None:
        raise malformed(read.where, "'members' is not a list of hosts", members)
    return Start(read.whole("attempt"), _cause(read, "cause"), found, read.flag("free"), _resume(read))


def _resume(read: Fields) -> Optional[Resume]:
    """A ``start``'s (or a ``hello``'s) ``resume``: absent or null, else an object naming a checkpoint's folder and
    its step."""
    value = read.raw("resume")
    if value is not None and not isinstance(value, dict):
        raise malformed(read.where, "'resume' is not an object", value)
    if value is None:
        return None
    inner = Fields(value, f"{read.where} 'resume'")
    name, step = inner.string("name"), inner.whole("step")
    if not _folder(name):
        raise malformed(inner.where, "'name' is not a checkpoint's folder", name)
    if step < 0:
        raise malformed(inner.where, "'step' is not a step (a whole number >= 0)", step)
    return Resume(name, step)


def _folder(name: str) -> bool:  # a checkpoint's folder: one path part, at most 255 characters, not hidden
    return 0 < len(name) <= 255 and not name.startswith(".") and "/" not in name and "\0" not in name


def _failing(read: Fields) -> Failing:
    return Failing(read.whole("attempt"), read.number("hold"))


def _silent(read: Fields) -> Silent:
    silent = read.raw("silent")
    if not isinstance(silent, bool):
        raise malformed(read.where, "'silent' is not true or false", silent)
    ended = read.flag("ended")
    if silent and ended:
        raise malformed(read.where, "'silent' and 'ended' are both true (ranks that ended are not silent)", silent)
    return Silent(read.whole("attempt"), silent, ended)


def _end(read: Fields) -> End:
    why = read.raw("why")
    try:
        reason = Why(why)
    except ValueError:
        raise malformed(read.where, f"'why' is not one of {', '.join(w.value for w in Why)}", why) from None
    return End(read.whole("attempt"), read.opt_whole("host"), text(read.string("addr"), _ADDR_MAX) or "", reason)


def _over(read: Fields) -> Over:
    return Over(read.whole("attempt"), _cause(read, "cause"))


def _finish(read: Fields) -> Finish:
    return Finish(read.whole("code"), _cause(read, "cause"), read.whole("attempt"))


def _prepared(read: Fields) -> Prepared:
    return Prepared(_cause(read, "cause"))


def _save(read: Fields) -> Tuple[int, str, int, int]:
    """The fields ``parts`` and ``saved`` share: the attempt, a checkpoint's folder (one path part), step, size."""
    name, size = read.string("name"), read.whole("size")
    if not _folder(name):
        raise malformed(read.where, "'name' is not a checkpoint's folder", name)
    if not 0 < size <= 1 << 20:
        raise malformed(read.where, "'size' is not a number of ranks", size)
    return read.whole("attempt"), name, read.whole("step"), size


def _parts(read: Fields) -> Parts:
    attempt, name, step, size = _save(read)
    ranks = read_members(read.raw("ranks"))
    if ranks is None or ranks[-1] >= size:
        raise malformed(read.where, f"'ranks' is not a list of ranks below {size}", read.raw("ranks"))
    return Parts(attempt, name, step, size, ranks)


_READERS: Dict[str, Callable[[Fields], Message]] = {
    "hello": _hello, "welcome": _welcome, "hb": lambda read: Heartbeat(), "start": _start, "failing": _failing,
    "silent": _silent, "end": _end, "over": _over, "finish": _finish, "prepared": _prepared, "parts": _parts,
    "saved": lambda read: Saved(*_save(read)),
}  # fmt: skip


def _cause(read: Fields, name: str) -> Optional[Cause]:
    return Cause.from_wire(read.raw(name), f"{read.where} {name!r}")


def _resume_wire(resume: Optional[Resume]) -> Dict[str, Any]:
    return {"resume": dict(resume._asdict())} if resume is not None else {}


def _cause_wire(cause: Optional[Cause]) -> Optional[Dict[str, Any]]:
    return cause.to_wire() if cause is not None else None
