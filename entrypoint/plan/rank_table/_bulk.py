"""Bulk validation of well-formed rank tables: the fast paths of :mod:`._parse`.

A 32,768-rank table is checked here in a few C-level passes over whole columns (``map``, ``join``, set and list
comparisons) instead of a Python loop per device. Each function returns None (or False) as soon as the input is
not the well-formed common case; the parser then walks the input item by item and reports the exact offending
value, so these functions never need to explain what is wrong.
"""

from __future__ import annotations

from itertools import accumulate, chain, pairwise, repeat
from operator import itemgetter
from typing import Any, Optional, Sequence

from .. import jsontext
from ._model import Server

__all__ = ["MAX_DIGITS", "CheckedServers", "RawDevice", "ServerColumns", "fast_devices", "fast_server_list"]

MAX_DIGITS = 9  # ids are small; this also keeps int() away from huge digit strings
#: One device as the parser keeps it: device_id (canonical), device_ip, rank (-1 until known).
RawDevice = tuple[str, str | None, int]  # no typing names: the alias exists at run time

_SMALL_IDS = frozenset(map(str, range(1024)))  # device ids in canonical form
_DEVICE_ID, _DEVICE_IP, _RANK_ID = itemgetter("device_id"), itemgetter("device_ip"), itemgetter("rank_id")
_SERVER_ID = itemgetter("server_id")


def _all_uint_strings(values: list[Any]) -> Optional[list[int]]:
    """The ints of a list of decimal strings, or None if any value is not one.

    Works in bulk (C-level ``join``/``isdigit``) so a 32k-rank table parses quickly; whenever it returns None
    the per-item path runs and reports the exact offending value.
    """
    try:
        joined = "".join(values)
    except TypeError:
        return None
    if not (joined.isascii() and joined.isdigit() and all(values) and max(map(len, values)) <= MAX_DIGITS):
        return None
    try:  # the C JSON scanner turns the digits into ints faster than int() one by one
        ints: list[int] = jsontext.loads("[" + ",".join(values) + "]")
    except ValueError:  # a leading zero ("07"), which JSON refuses and int() takes
        return list(map(int, values))
    return ints


def fast_devices(items: list[Any], need_rank: bool) -> Optional[list[RawDevice]]:
    """Fast path for a well-formed device list of string values; None means "check item by item"."""
    try:
        ids = list(map(_DEVICE_ID, items))
        ips = list(map(_DEVICE_IP, items))
        ranks = _all_uint_strings(list(map(_RANK_ID, items))) if need_rank else [-1] * len(items)
        "".join(ips)  # all strings
        canonical = all(map(_SMALL_IDS.__contains__, ids))  # TypeError for unhashable values
    except (TypeError, KeyError, IndexError):
        return None
    if not canonical or ranks is None or len(set(ids)) != len(ids):
        return None
    return list(zip(ids, ips, ranks))


def fast_server_list(listed: list[Any]) -> Optional[tuple[Server, ...]]:
    """Fast path for a well-formed ``server_list`` (string values, every device with ``device_ip``): validates and
    builds all servers with a handful of C-level passes over the whole table; None means "check item by item"."""
    columns = ServerColumns()
    return columns.servers() if columns.add(listed) else None


def _getters_of(device: Any) -> tuple[itemgetter[Any], itemgetter[Any], itemgetter[Any]]:
    """The getters of a device's ``device_id``, ``device_ip`` and ``rank_id``, made from ``device``'s own key strings
    (a part's first device): the decoder makes the text of a key once per part and gives every object of the part
    that same string, so each lookup then finds its key at once, where the getters' own strings would be compared
    with it character by character (98,304 lookups in a 32,768-rank table). Any other value: the usual getters."""
    own = {key: key for key in device} if type(device) is dict else {}
    return itemgetter(own.get("device_id", "device_id")), itemgetter(own.get("device_ip", "device_ip")), \
        itemgetter(own.get("rank_id", "rank_id"))  # fmt: skip


class CheckedServers(tuple[Server, ...]):
    """The servers of a ``server_list`` that :class:`ServerColumns` has already checked and built, standing in for
    the list in decoded JSON (a reader that decodes the list in parts puts them there): the parser then checks the
    rest of the table and takes these as they are. Only this package makes one."""

    __slots__ = ()


class ServerColumns:
    """The columns of a well-formed ``server_list``, taken from its servers in one or more parts (:meth:`add`), then
    checked as a whole and made into servers (:meth:`servers`).

    The only per-device work is three ``itemgetter`` maps (one per value) and a few joins and comparisons over
    the columns they give; no object is made per device, and no decoded server is kept, so a reader may free each
    part once added. What is the same for every server is checked once: usually each server lists the same device
    ids in the same order and the ranks run ``"0"``, ``"1"``, ... in file order, and then the rank column is a
    ``range``.
    """

    def __init__(self) -> None:
        self.ids: list[Any] = []  # server_id
        self.host_ips: list[Any] = []
        self.server_ips: list[Any] = []
        self.pods: list[Any] = []
        self.sizes: list[int] = []  # devices per server
        self.device_ids: list[Any] = []  # every server's, as listed, once they are not all alike (see _add_ids)
        self.same_ids: Optional[list[Any]] = None  # while every server so far lists these ids, in this order
        self.same_count = 0  # that many servers
        self.device_ips: list[Any] = []
        self.rank_texts: list[str] = []  # each part's rank ids joined by commas (its strings freed with the part)

    def add(self, listed: list[Any]) -> bool:
        """Take the next servers (decoded JSON objects, in file order); False if they are not the well-formed common
        case (the whole list must then be checked item by item)."""
        try:
            ids = list(map(_SERVER_ID, listed))
            if not all(map(str.strip, ids)):  # str.strip: TypeError unless str
                return False
            lists: list[Any] = list(map(dict.get, listed, repeat("device")))
            sizes = list(map(list.__len__, lists))  # TypeError unless all are lists
            if 0 in sizes:
                return False
            device_id, device_ip, rank_id = _getters_of(lists[0][0] if lists else None)
            flat = chain.from_iterable  # each pass walks the servers' lists again: cheaper than one flat list
            device_ips = list(map(device_ip, flat(lists)))
            "".join(device_ips)  # TypeError unless all are strings
            device_ids = list(map(device_id, flat(lists)))
            rank_text = ",".join(map(rank_id, flat(lists)))  # TypeError unless all are strings
        except (TypeError, KeyError, IndexError):
            return False
        self._add_ids(device_ids, sizes)
        self.rank_texts.append(rank_text)
        self.ids += ids
        self.host_ips += map(dict.get, listed, repeat("host_ip"))
        self.server_ips += map(dict.get, listed, repeat("server_ip"))
        self.pods += map(dict.get, listed, repeat("pod_name"))
        self.sizes += sizes
        self.device_ips += device_ips
        return True

    def _add_ids(self, device_ids: list[Any], sizes: list[int]) -> None:
        """Keep the part's device ids. While every server lists the same ids in the same order (the usual case),
        that is only the first server's list and a count: the part's own id strings are freed with the part, where
        keeping them would hold 32,768 new strings for a 32,768-rank table (fresh memory, touched page by page)."""
        if not self.sizes:  # the first part
            self.same_ids = device_ids[:sizes[0]]
        same = self.same_ids
        if same is not None:
            if sizes.count(len(same)) == len(sizes) and device_ids == same * len(sizes):
                self.same_count += len(sizes)
                return
            self.device_ids = same * self.same_count  # servers differ from here on: the column as listed
            self.same_ids = None
        self.device_ids += device_ids

    def servers(self) -> Optional[tuple[Server, ...]]:
        """The servers of everything added, ordered by their lowest rank; None if the whole is not well-formed."""
        ids, hosts = self.ids, self.host_ips
        if not ids or len(set(ids)) != len(ids):
            return None
        if hosts.count(None) == len(hosts):
            hosts = self.server_ips
        elif None in hosts:
            return None  # some servers say host_ip, others server_ip or nothing: the slow path tells which
        for column in (hosts, self.pods):
            if column.count(None) != len(column) and not all(
                    value is None or (type(value) is str and value.strip()) for value in column):  # fmt: skip
                return None
        starts = list(accumulate(self.sizes, initial=0))
        same = self.same_ids
        device_ids = self.device_ids if same is None else same * self.same_count
        try:  # servers known to list the same ids as the first one (see add) are checked as that one
            if not (_device_ids_valid(device_ids, starts) if same is None else _device_ids_valid(same, starts[:2])):
                return None
        except TypeError:  # an unhashable id
            return None
        total = len(device_ids)
        joined = ",".join(self.rank_texts)  # every rank id as listed, in file order
        ranks: Sequence[int]
        if _counts_up(joined, total):  # the usual case: ranks 0..N-1 in file order
            ranks = range(total)
        else:
            rank_values = joined.split(",")  # more than total values if one holds a comma: not a number anyway
            listed_ranks = _all_uint_strings(rank_values) if len(rank_values) == total else None
            if listed_ranks is None or len(set(listed_ranks)) != total or max(listed_ranks) >= total:
                return None
            ranks = listed_ranks
        columns = (device_ids, self.device_ips, ranks)
        # tuple.__new__ straight: a NamedTuple's own __new__ is a Python function, one call per server
        servers: list[Server] = list(map(tuple.__new__, repeat(Server), zip(ids, self.pods, hosts, repeat(columns),
                                                                            starts, starts[1:])))
        if type(ranks) is not range:  # servers are then not necessarily ordered by lowest rank
            servers.sort(key=lambda server: min(ranks[server.start:server.end]))
        return tuple(servers)


def _device_ids_valid(device_ids: list[Any], starts: list[int]) -> bool:
    """Whether every id is canonical (``"0"`` to ``"1023"``) and unique within its server (``device_ids[a:b]``
    for consecutive ``starts``). When all servers list the same ids in the same order, the first server is
    checked and the whole column compared with its ids repeated; otherwise each server's slice is checked.

    Raises:
        TypeError: an id is unhashable (the caller then checks item by item).
    """
    servers = len(starts) - 1
    size = starts[1]
    first = device_ids[:size]
    if len(set(first)) != size or not _SMALL_IDS.issuperset(first):
        return False
    uniform = starts[-1] == size * servers and starts == list(range(0, starts[-1] + 1, size))
    if uniform and device_ids == first * servers:
        return True
    return _SMALL_IDS.issuperset(device_ids) and all(len(set(device_ids[a:b])) == b - a
                                                     for a, b in pairwise(starts))


_TWO_DIGITS = [f"{i:02d}" for i in range(100)]  # "00" to "99": the numbers p00 to p99 joined by "," + p after p


def _decimals(count: int, first: int = 0) -> str:
    """``",".join(map(str, range(first, first + count)))``, made a hundred numbers per C call where a whole hundred
    is in the range (``_TWO_DIGITS`` joined by a comma and the hundred's prefix, after that prefix): converting 32,768
    ints to text one at a time costs more than the rest of the rank check."""
    end = first + count
    head = min(end, -(-first // 100) * 100)  # the numbers before the first whole hundred
    low, high = head // 100, end // 100  # the whole hundreds: low*100 .. high*100-1
    parts = [",".join(map(str, range(first, head)))] if first < head else []
    if low < high:
        if low == 0:  # the first hundred has no prefix
            parts.append(",".join(map(str, range(100))))
            low = 1
        parts += (prefix + ("," + prefix).join(_TWO_DIGITS) for prefix in map(str, range(low, high)))
    tail = max(head, high * 100)
    if tail < end:
        parts.append(",".join(map(str, range(tail, end))))
    return ",".join(parts)


def _counts_up(joined: str, count: int) -> bool:
    """Whether ``joined``, ``count`` strings joined by commas, is exactly ``"0,1,...,count-1"``.

    One string comparison: the joined text has exactly ``count - 1`` commas only if no value holds one, so equal
    texts mean equal values.
    """
    return joined == _decimals(count)
