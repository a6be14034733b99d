"""The data a parsed rank table is made of: :class:`Device`, :class:`Server`, :class:`RankTable`.

Re-exported by :mod:`malaunch.entrypoint.plan.rank_table`; built by :mod:`._parse`. Also home of
:func:`shown`, which bounds any decoded JSON value for an error message.
"""


from __future__ import annotations

import reprlib
from operator import attrgetter
from typing import Callable, NamedTuple, Optional, Sequence

__all__ = ["Device", "RankTable", "Server", "shown"]


class Device(NamedTuple):
    """One accelerator: its index on the server (canonical decimal string), NIC address and global rank.

    Named tuples, not dataclasses, here and for :class:`RankTable`: the shim builds them before its first rank
    starts, and importing :mod:`dataclasses` alone costs more start-up time than everything in this module.
    """

    device_id: str
    device_ip: Optional[str]
    rank_id: int


class Server(NamedTuple):
    """One host (or, in a v0 table, one pod) and its devices in file order.

    The devices live in columns shared by the whole table (``columns[i][start:end]``: device ids, device IPs,
    ranks) and become :class:`Device` objects only when ``devices`` is read, so a 32,768-rank table costs one small
    tuple per server, not one object per rank: a host only ever reads its own server's devices. The rank column
    is a ``range`` when the ranks run 0..N-1 in file order (the usual case). Compare servers with ``==`` (by id,
    pod, host IP and devices), never by their columns.
    """

    server_id: str
    pod_name: Optional[str]
    host_ip: Optional[str]
    columns: tuple[Sequence[str], Sequence[Optional[str]], Sequence[int]]
    start: int
    end: int

    @property
    def device_count(self) -> int:
        """Number of devices (ranks) on this server."""
        return self.end - self.start

    @property
    def rank_ids(self) -> tuple[int, ...]:
        """The devices' global ranks, in file order."""
        return tuple(self.columns[2][self.start:self.end])

    @property
    def devices(self) -> tuple[Device, ...]:
        """The devices in file order."""
        ids, ips, ranks = self.columns
        window = slice(self.start, self.end)
        return tuple(map(Device, ids[window], ips[window], ranks[window]))

    def _key(self) -> tuple[object, ...]:
        return self.server_id, self.pod_name, self.host_ip, self.devices

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Server) and self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Server(server_id={self.server_id!r}, pod_name={self.pod_name!r}, host_ip={self.host_ip!r}, "
                f"devices={self.device_count})")


class RankTable(NamedTuple):
    """A validated rank table; ``format`` is ``"group_list"``, ``"v0"``, ``"1.0"`` or ``"1.2"``.

    ``notes`` are facts about how the table was read that a user may want to know (shown in the plan's notes).
    """

    path: str
    format: str
    status: str
    servers: tuple[Server, ...]
    notes: tuple[str, ...] = ()

    @property
    def rank_size(self) -> int:
        """Total number of devices (ranks) in the table (without a Python call per server)."""
        return sum(map(_END, self.servers)) - sum(map(_START, self.servers))


_START: Callable[[Server], int] = attrgetter("start")
_END: Callable[[Server], int] = attrgetter("end")




def shown(value: object) -> object:
    """The value as messages show it: short scalars as they are, anything else as a shortened repr."""
    if (type(value) is int and value.bit_length() <= 64) or value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, str) and len(value) <= 80:
        return value

    shortened = reprlib.Repr()  # bounded in size and depth, so any decoded JSON can be shown
    shortened.maxlevel, shortened.maxstring, shortened.maxother = 3, 60, 60
    shortened.maxlist = shortened.maxtuple = shortened.maxdict = 4
    try:
        return shortened.repr(value)
    except (ValueError, RecursionError):  # ints beyond the int->str digit limit
        return f"<{type(value).__name__}>"
