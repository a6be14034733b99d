"""Parsing of the four rank-table layouts into the data of :mod:`._model`.

Kept apart from the waiting and server selection so that each module stays small; the public names are
re-exported by ``rank_table``. The bulk fast paths of :mod:`._bulk` validate a well-formed
``server_list`` (or device list) in a few C-level passes over the whole table; only input that fails them is
walked item by item here, so that the error can name the exact value. Both make the same checks.
"""

from __future__ import annotations

import gc
from typing import Any, Callable, NoReturn, Optional, Sequence

from ...contract.errors import RankTableError
from ._bulk import MAX_DIGITS, CheckedServers, RawDevice, fast_devices, fast_server_list
from ._model import Device, RankTable, Server, shown

__all__ = ["COMPLETED", "Device", "RankTable", "Server", "no_gc", "parse_rank_table", "shown"]

COMPLETED = "completed"
_VERSIONS = ("1.0", "1.2")
_UINT_LIMIT = 10**MAX_DIGITS
_UINT = 'expected a non-negative whole number, e.g. "0"'
_SERVER_WHAT = "the server's id (often its IP)"
_DEVICE = '{"device_id": "0", "device_ip": "192.168.1.6", "rank_id": "0"}'


def _uint(value: object) -> Optional[int]:
    """``value`` as an int >= 0 if it is one (a JSON int or a decimal string), else None; bools are not."""
    if type(value) is int:
        return value if 0 <= value < _UINT_LIMIT else None
    if isinstance(value, str) and 0 < len(value) <= MAX_DIGITS and value.isascii() and value.isdigit():
        return int(value)
    return None


_RawServer = tuple[str, str | None, str | None, list[RawDevice]]  # id, pod_name, host_ip, devices


class _Parser:
    """Validation helpers bound to one file path (used in every message)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, value: object, expected: str) -> NoReturn:
        raise RankTableError(self.path, where, shown(value), expected)

    def obj(self, where: str, value: object, example: str) -> dict[Any, Any]:
        if not isinstance(value, dict):
            self.fail(where, value, f"expected a JSON object such as {example}")
        return value

    def items(self, where: str, value: object, what: str) -> list[Any]:
        if not isinstance(value, (list, tuple)) or not value:
            self.fail(where, value, f"expected a non-empty list of {what}")
        return list(value)

    def text(self, where: str, value: object, what: str) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail(where, value, f"expected {what} as a non-empty string")
        return value

    def opt_text(self, where: str, value: object, what: str) -> Optional[str]:
        return None if value is None else self.text(where, value, what)

    def uint(self, where: str, value: object, expected: str = _UINT) -> int:
        checked = _uint(value)
        if checked is None:
            self.fail(where, value, expected)
        return checked

    def devices(self, base: str, raw: object, need_rank: bool) -> list[RawDevice]:
        """The devices listed at ``base`` (e.g. ``server_list[0].device``); rank -1 unless ``need_rank``."""
        items = self.items(base, raw, f"devices such as {_DEVICE}")
        fast = fast_devices(items, need_rank)
        if fast is not None:
            return fast
        out: list[RawDevice] = []
        seen: dict[int, int] = {}
        for index, item in enumerate(items):
            where = f"{base}[{index}]"
            item = self.obj(where, item, _DEVICE)
            device_id = self.uint(f"{where}.device_id", item.get("device_id"),
                                  'expected the index of the device on its server, e.g. "0"')
            if device_id in seen:
                self.fail(f"{where}.device_id", item.get("device_id"),
                          f"expected each device_id once per server; {base}[{seen[device_id]}] has it too")
            seen[device_id] = index
            device_ip = item.get("device_ip")
            if device_ip is not None and not isinstance(device_ip, str):
                self.fail(f"{where}.device_ip", device_ip, 'expected an IP address string: "192.168.1.6"')
            rank = self.uint(f"{where}.rank_id", item.get("rank_id")) if need_rank else -1
            out.append((str(device_id), device_ip, rank))
        return out

    def check_ranks(self, ranks: list[int], where: Callable[[int], str]) -> None:
        """Ranks (all >= 0) must be unique and cover 0..N-1; N unique ranks all below N do exactly that.

        ``where(i)`` names the place of ``ranks[i]`` in the table; it is only called to report an error.
        """
        total = len(ranks)
        if len(set(ranks)) == total and max(ranks) < total:
            return
        owner = [-1] * total
        for i, rank in enumerate(ranks):
            if rank >= total:
                self.fail(where(i), rank, f"expected each rank id in 0..{total - 1} once, one per device")
            if owner[rank] >= 0:
                self.fail(where(i), rank, f"expected unique rank ids; {where(owner[rank])} has it too")
            owner[rank] = i

    def server_list(self, top: dict[Any, Any]) -> tuple[Server, ...]:
        listed = self.items("server_list", top.get("server_list"), 'servers {"server_id", "device": [...]}')
        count = top.get("server_count")
        if count is not None and _uint(count) != len(listed):
            self.fail("server_count", count, f"expected the number of servers in server_list ({len(listed)})")
        fast = tuple(listed) if type(top["server_list"]) is CheckedServers else fast_server_list(listed)
        if fast is not None:
            self.super_pods(top.get("super_pod_list"))
            return fast
        entries: list[_RawServer] = []
        ranks: list[int] = []
        starts: list[int] = []  # index in ranks of each server's first device
        seen: dict[str, int] = {}
        for index, raw in enumerate(listed):
            base = f"server_list[{index}]"
            server = self.obj(base, raw, '{"server_id": "10.0.0.1", "device": [...]}')
            server_id = self.text(f"{base}.server_id", server.get("server_id"), _SERVER_WHAT)
            if server_id in seen:
                self.fail(f"{base}.server_id", server_id,
                          f"expected each server once; server_list[{seen[server_id]}] has it too")
            seen[server_id] = index
            key = "host_ip" if "host_ip" in server else "server_ip"
            host_ip = self.opt_text(f"{base}.{key}", server.get(key), "the host's IP address")
            pod_name = self.opt_text(f"{base}.pod_name", server.get("pod_name"), "the pod name")
            devices = self.devices(f"{base}.device", server.get("device"), need_rank=True)
            starts.append(len(ranks))
            ranks.extend(device[2] for device in devices)
            entries.append((server_id, pod_name, host_ip, devices))

        def where(i: int) -> str:  # only for the message of a refusal: a walk over the servers is soon enough
            server = sum(start <= i for start in starts) - 1  # the last server starting at or before device i
            return f"server_list[{server}].device[{i - starts[server]}].rank_id"

        self.check_ranks(ranks, where)
        self.super_pods(top.get("super_pod_list"))
        return _build(entries)

    def super_pods(self, raw: object) -> None:
        """Shape check only: ``[{"super_pod_id": "0", "server_list": [{"server_id": ...}]}]``."""
        example = '{"super_pod_id": "0", "server_list": [{"server_id": "node_0"}]}'
        if raw is None:
            return
        if not isinstance(raw, (list, tuple)):
            self.fail("super_pod_list", raw, f"expected a list of super pods such as {example}")
        for index, pod in enumerate(raw):
            base = f"super_pod_list[{index}]"
            pod = self.obj(base, pod, example)
            if "super_pod_id" in pod:
                self.uint(f"{base}.super_pod_id", pod["super_pod_id"])
            for member_index, member in enumerate(self.items(f"{base}.server_list", pod.get("server_list"),
                                                             'servers such as {"server_id": "node_0"}')):
                where = f"{base}.server_list[{member_index}]"
                member = self.obj(where, member, '{"server_id": "node_0"}')
                self.text(f"{where}.server_id", member.get("server_id"), "a server_id from server_list")

    def group_list(self, top: dict[Any, Any]) -> tuple[str, tuple[Server, ...], tuple[str, ...]]:
        """Legacy template 2 (``rank_id`` per instance) or ModelArts v0 (``pod_name``, no ``rank_id``)."""
        instances: list[tuple[str, dict[Any, Any]]] = []
        groups = self.items("group_list", top.get("group_list"), 'groups such as {"instance_list": [...]}')
        for group_index, group in enumerate(groups):
            base = f"group_list[{group_index}]"
            group = self.obj(base, group, '{"group_name": "", "instance_list": [...]}')
            for index, instance in enumerate(self.items(f"{base}.instance_list", group.get("instance_list"),
                                                        "instances")):
                where = f"{base}.instance_list[{index}]"
                instances.append((where, self.obj(where, instance, '{"server_id": ..., "devices": [...]}')))
        first_where, first = instances[0]
        legacy = first.get("rank_id") is not None
        for where, instance in instances:
            if (instance.get("rank_id") is not None) != legacy:
                self.fail(f"{where}.rank_id", instance.get("rank_id"),
                          f"expected a rank_id as in {first_where}" if legacy else
                          f"expected no rank_id, as in {first_where} (ranks then follow pod_name order)")
        if legacy:
            return "group_list", self.legacy(instances), ()
        return ("v0", *self.v0(instances))

    def legacy(self, instances: list[tuple[str, dict[Any, Any]]]) -> tuple[Server, ...]:
        by_server: dict[str, list[RawDevice]] = {}
        known: dict[str, set[str]] = {}
        ranks: list[int] = []
        locs: list[str] = []
        for where, instance in instances:
            server_id = self.text(f"{where}.server_id", instance.get("server_id"), _SERVER_WHAT)
            base_rank = self.uint(f"{where}.rank_id", instance.get("rank_id"))
            server_devices = by_server.setdefault(server_id, [])
            server_known = known.setdefault(server_id, set())
            for index, (device_id, device_ip, _) in enumerate(
                    self.devices(f"{where}.devices", instance.get("devices"), need_rank=False)):
                if device_id in server_known:
                    self.fail(f"{where}.devices[{index}].device_id", device_id,
                              f"expected each device_id once per server; another instance of {server_id} has"
                              " it")
                server_known.add(device_id)
                server_devices.append((device_id, device_ip, base_rank + index))
                ranks.append(base_rank + index)
                locs.append(f"{where}.rank_id")
        self.check_ranks(ranks, locs.__getitem__)
        return _build([(server_id, None, None, devices) for server_id, devices in by_server.items()])

    def v0(self, instances: list[tuple[str, dict[Any, Any]]]) -> tuple[tuple[Server, ...], tuple[str, ...]]:
        """Pods ordered by the number after the last ``-`` of ``pod_name`` when every pod has a distinct one, else
        in file order (said in the returned notes); ranks are then numbered through the pods' devices."""
        keyed: list[tuple[Optional[int], str, str, list[RawDevice]]] = []
        for where, instance in instances:
            pod_name = self.text(f"{where}.pod_name", instance.get("pod_name"), "the pod name")
            server_id = self.text(f"{where}.server_id", instance.get("server_id"), _SERVER_WHAT)
            keyed.append((_pod_index(pod_name), server_id, pod_name,
                          self.devices(f"{where}.devices", instance.get("devices"), need_rank=False)))
        indexes = [entry[0] for entry in keyed]
        notes: tuple[str, ...] = ()
        if None not in indexes and len(set(indexes)) == len(indexes):
            keyed.sort(key=lambda entry: entry[0] or 0)
        elif len(keyed) > 1:
            names = ", ".join(repr(entry[2]) for entry in keyed[:4]) + (", ..." if len(keyed) > 4 else "")
            notes = (f"v0 rank table: the pod names ({names}) do not all end in distinct numbers after a '-', so the "
                     "ranks follow the pods' order in the file",)
        servers: list[Server] = []  # already in rank order: each pod's ranks follow the previous pod's
        next_rank = 0
        for _, server_id, pod_name, devices in keyed:
            ids, ips, _ = zip(*devices)
            servers.append(Server(server_id, pod_name, None, (ids, ips, range(next_rank, next_rank + len(devices))),
                                  0, len(devices)))
            next_rank += len(devices)
        return tuple(servers), notes


def _pod_index(pod_name: str) -> Optional[int]:
    """The number after the last ``-`` of a pod name (``job-pod-10`` -> 10), or None if it has none."""
    _, dash, tail = pod_name.rpartition("-")
    return int(tail) if dash and 0 < len(tail) <= MAX_DIGITS and tail.isascii() and tail.isdigit() else None


def _build(entries: list[_RawServer]) -> tuple[Server, ...]:
    entries = sorted(entries, key=lambda entry: min(device[2] for device in entry[3]))
    return tuple(Server(server_id, pod, host, _columns(devices), 0, len(devices))
                 for server_id, pod, host, devices in entries)


def _columns(devices: Sequence[RawDevice]) -> tuple[list[str], list[Optional[str]], list[int]]:
    return [d[0] for d in devices], [d[1] for d in devices], [d[2] for d in devices]


class _GcPaused:
    """``with``: the collector off inside, on again after if it was on before (so nested pauses are one)."""

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *_exc: object) -> None:
        if self.was_enabled:
            gc.enable()


def no_gc() -> _GcPaused:
    """The cyclic garbage collector paused: decoding and parsing a table make ~100k acyclic objects per 32k
    ranks, and collections triggered by them would walk all of them again and again, for nothing. (A class, not
    contextlib: start-up would import contextlib and functools for it.)"""
    return _GcPaused()


def parse_rank_table(data: object, path: str) -> RankTable:
    """Validate decoded JSON ``data`` read from ``path`` (used in messages) and return its :class:`RankTable`.

    Pure: no I/O. ``status`` must be a string but is not required to be "completed".

    Raises:
        RankTableError: the first problem found, with its JSON path inside the table and what is expected.
    """
    with no_gc():
        return _parse(data, path)


def _parse(data: object, path: str) -> RankTable:
    parser = _Parser(path)
    top = parser.obj("(top level)", data, '{"version": "1.0", "status": "completed", "server_list": [...]}')
    status = top.get("status")
    if not isinstance(status, str):
        parser.fail("status", status, 'expected a string, "completed" once the table is ready')
    version = top.get("version")
    if isinstance(version, float) and str(version) in _VERSIONS:
        version = str(version)
    if version is None and "group_list" in top:
        fmt, servers, notes = parser.group_list(top)
        return RankTable(path=path, format=fmt, status=status, servers=servers, notes=notes)
    if version not in _VERSIONS:
        parser.fail("version", version, 'expected "1.0" or "1.2" with a server_list, or no version and a '
                    "group_list (legacy or ModelArts v0 table)")
    return RankTable(path=path, format=str(version), status=status, servers=parser.server_list(top))


