"""An attempt's root cause as the coordinator's messages carry it (:mod:`.messages` re-exports it). Pure."""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple

from .fields import Fields, malformed

__all__ = ["Cause"]


class Cause(NamedTuple):
    """An attempt's root cause, as a host tells it (``over``) or the coordinator chose it (``start``, ``finish``).

    ``tail`` is what the host said of its rank's output, as it said it; what the coordinator adds of its own (why
    it chose this cause: :mod:`.jobstate`'s rule 3) is ``why``, shown as the shim's own line, never in the tail.
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
    why: str = ""  # the coordinator's own words on how it chose this cause among the hosts' (equal evidence)

    def to_wire(self) -> Dict[str, Any]:
        """The cause as JSON (every field; the report's ``job_cause`` is this)."""
        return {**self._asdict(), "tail": list(self.tail)}

    @classmethod
    def from_wire(cls, value: object, where: str) -> Optional[Cause]:
        """The cause of a message's field (``where`` names it); None for null. Raises :class:`WireError`."""
        if value is None:
            return None
        if not isinstance(value, dict):
            raise malformed(where, "is not an object", value)
        read = Fields(value, where)
        return cls(
            host=read.opt_whole("host"), addr=read.string("addr"), rank=read.opt_whole("rank"),
            name=read.string("name"), code=read.opt_whole("code"), signal=read.opt_whole("signal"),
            kind=read.opt_string("kind"), retryable=read.flag("retryable"), accept=read.flag("accept"),
            peer=read.flag("peer"), ended=read.flag("ended"), line=read.string("line"), tail=read.lines("tail"),
            log=read.string("log"), score=read.opt_whole("score"), why=read.string("why"),
        )  # fmt: skip
