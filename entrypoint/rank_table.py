"""Ascend rank tables (``RANK_TABLE_FILE``): parse, wait for status "completed", pick this host's server.

Four layouts are accepted (``RankTable.format``):

- ``"1.0"``: ``{"version": "1.0", "server_count", "server_list": [{"server_id", "device": [{"device_id",
  "device_ip", "rank_id"}], "host_nic_ip"}]}`` (MindSpore ``hccl_tools``, ModelArts, MindCluster).
- ``"1.2"``: as 1.0 plus ``host_ip`` per server and ``super_device_id`` per device, and a ``super_pod_list``
  (Atlas A3). ``super_pod_list`` is only checked for shape and is otherwise ignored. In both versions
  ``Server.host_ip`` comes from ``host_ip``, else MindCluster's ``server_ip``; ``host_nic_ip`` is ignored.
- ``"group_list"``: the legacy CANN "template 2", ``group_list[].instance_list[]`` with ``rank_id`` and
  ``server_id`` per instance. Instances of one ``server_id`` form one server. An instance normally holds
  one device; if it lists several, device ``i`` gets rank ``rank_id + i`` (the usual checks then apply).
- ``"v0"``: the CCE/ModelArts ``jobstart_hccl.json`` ring-controller form: like ``group_list`` but with
  ``pod_name`` and no ``rank_id``. Each instance is one server; ranks follow the instances sorted by the
  number ending ``pod_name`` (``job-pod-2`` < ``job-pod-10``), then the devices in listed order.

Contract of a parsed :class:`RankTable`:

1. Every number in the file may be a JSON integer or a decimal string (real files use strings).
2. Rank ids are unique and are exactly ``0 .. rank_size-1``; a ``device_id`` appears once per server.
3. ``servers`` are ordered by their lowest rank (the platform's ``VC_TASK_INDEX`` order); each server's
   ``devices`` keep the order of the file. ``device_id`` is in canonical decimal form (``"07"`` -> ``"7"``).
4. A malformed table raises :class:`~malaunch.entrypoint.errors.RankTableError` whose ``where`` is a JSON
   path inside the table, such as ``server_list[1].device[0].rank_id``.

The platform writes the file asynchronously (a ConfigMap replaced through symlinks), so
:func:`wait_for_rank_table` re-reads it on every poll and treats a missing file, half-written JSON or a
status other than "completed" as not ready yet (:class:`RankTableNotReady`) until its deadline.
"""

from __future__ import annotations

import bisect
import json
import os
import reprlib
import time
from dataclasses import dataclass
from itertools import starmap
from operator import itemgetter
from typing import Any, Callable, NoReturn, Optional

from .errors import ConfigError, RankTableError, WaitTimeout

__all__ = [
    "RANK_TABLE_DIR_FILE", "Device", "RankTable", "RankTableNotReady", "Server", "parse_rank_table",
    "read_rank_table", "resolve_rank_table_path", "select_server", "wait_for_rank_table",
]

#: The file inside ``RANK_TABLE_FILE`` when that variable names a directory (ModelArts convention).
RANK_TABLE_DIR_FILE = "jobstart_hccl.json"
_COMPLETED = "completed"
_VERSIONS = ("1.0", "1.2")
_PROGRESS_EVERY = 10.0  # seconds between on_wait calls
_MAX_DIGITS = 9  # ids are small; this also keeps int() away from huge digit strings
_UINT_LIMIT = 10**_MAX_DIGITS
_UINT = 'expected a non-negative whole number, e.g. "0"'
_SERVER_ID = "the server's id (often its IP)"
_DEVICE = '{"device_id": "0", "device_ip": "192.168.1.6", "rank_id": "0"}'


@dataclass(frozen=True)
class Device:
    """One accelerator: its index on the server (canonical decimal string), NIC address and global rank."""

    device_id: str
    device_ip: Optional[str]
    rank_id: int


@dataclass(frozen=True)
class Server:
    """One host (or, in a v0 table, one pod) and its devices in file order."""

    server_id: str
    pod_name: Optional[str]
    host_ip: Optional[str]
    devices: tuple[Device, ...]


@dataclass(frozen=True)
class RankTable:
    """A validated rank table; ``format`` is ``"group_list"``, ``"v0"``, ``"1.0"`` or ``"1.2"``."""

    path: str
    format: str
    status: str
    servers: tuple[Server, ...]

    @property
    def rank_size(self) -> int:
        """Total number of devices (ranks) in the table."""
        return sum(len(server.devices) for server in self.servers)


class RankTableNotReady(Exception):
    """Internal signal: the file is not usable *yet* (missing, half-written, not completed): ``reason``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def resolve_rank_table_path(value: str, is_dir: Callable[[str], bool] = os.path.isdir) -> str:
    """The file named by ``RANK_TABLE_FILE``: the value itself, or ``<dir>/jobstart_hccl.json``.

    A value ending in a path separator counts as a directory even if it does not exist yet.

    Raises:
        ConfigError: the value is empty.
    """
    if not value.strip():
        raise ConfigError("RANK_TABLE_FILE", value, f"expected a file or a folder with {RANK_TABLE_DIR_FILE}")
    if value.endswith(("/", os.sep)) or is_dir(value):
        return os.path.join(os.path.normpath(value), RANK_TABLE_DIR_FILE)
    return value


_REPR = reprlib.Repr()  # bounded in size and depth, so any decoded JSON can be shown
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 60, 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = 4


def _shown(value: object) -> object:
    """The value as messages show it: short scalars as they are, anything else as a shortened repr."""
    if (type(value) is int and value.bit_length() <= 64) or value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, str) and len(value) <= 80:
        return value
    try:
        return _REPR.repr(value)
    except (ValueError, RecursionError):  # ints beyond the int->str digit limit
        return f"<{type(value).__name__}>"


def _uint(value: object) -> Optional[int]:
    """``value`` as an int >= 0 if it is one (a JSON int or a decimal string), else None; bools are not."""
    if type(value) is int:
        return value if 0 <= value < _UINT_LIMIT else None
    if isinstance(value, str) and 0 < len(value) <= _MAX_DIGITS and value.isascii() and value.isdigit():
        return int(value)
    return None


_SMALL_IDS = frozenset(map(str, range(1024)))  # device ids in canonical form, for the fast path
_DEVICE_ID, _DEVICE_IP, _RANK_ID = itemgetter("device_id"), itemgetter("device_ip"), itemgetter("rank_id")
_RawDevice = tuple[str, Optional[str], int]  # device_id, device_ip, rank (-1 until known)
_RawServer = tuple[str, Optional[str], Optional[str], list[_RawDevice]]  # id, pod_name, host_ip, devices


def _all_uint_strings(values: list[Any]) -> Optional[list[int]]:
    """Fast path: the ints of a list of decimal strings, or None if any value is not one.

    Works in bulk (C-level ``join``/``isdigit``) so a 32k-rank table parses quickly; whenever it returns None
    the per-item path runs and reports the exact offending value.
    """
    try:
        joined = "".join(values)
    except TypeError:
        return None
    if joined.isascii() and joined.isdigit() and all(values) and max(map(len, values)) <= _MAX_DIGITS:
        return list(map(int, values))
    return None


def _fast_devices(items: list[Any], need_rank: bool) -> Optional[list[_RawDevice]]:
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


class _Parser:
    """Validation helpers bound to one file path (used in every message)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, value: object, expected: str) -> NoReturn:
        raise RankTableError(self.path, where, _shown(value), expected)

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

    def devices(self, base: str, raw: object, need_rank: bool) -> list[_RawDevice]:
        """The devices listed at ``base`` (e.g. ``server_list[0].device``); rank -1 unless ``need_rank``."""
        items = self.items(base, raw, f"devices such as {_DEVICE}")
        fast = _fast_devices(items, need_rank)
        if fast is not None:
            return fast
        out: list[_RawDevice] = []
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
        entries: list[_RawServer] = []
        ranks: list[int] = []
        starts: list[int] = []  # index in ranks of each server's first device
        seen: dict[str, int] = {}
        for index, raw in enumerate(listed):
            base = f"server_list[{index}]"
            server = self.obj(base, raw, '{"server_id": "10.0.0.1", "device": [...]}')
            server_id = self.text(f"{base}.server_id", server.get("server_id"), _SERVER_ID)
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

        def where(i: int) -> str:
            server = bisect.bisect_right(starts, i) - 1
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

    def group_list(self, top: dict[Any, Any]) -> tuple[str, tuple[Server, ...]]:
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
        return ("group_list", self.legacy(instances)) if legacy else ("v0", self.v0(instances))

    def legacy(self, instances: list[tuple[str, dict[Any, Any]]]) -> tuple[Server, ...]:
        by_server: dict[str, list[_RawDevice]] = {}
        known: dict[str, set[str]] = {}
        ranks: list[int] = []
        locs: list[str] = []
        for where, instance in instances:
            server_id = self.text(f"{where}.server_id", instance.get("server_id"), _SERVER_ID)
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

    def v0(self, instances: list[tuple[str, dict[Any, Any]]]) -> tuple[Server, ...]:
        keyed: list[tuple[int, str, str, list[_RawDevice]]] = []
        by_index: dict[int, str] = {}
        for where, instance in instances:
            pod_name = self.text(f"{where}.pod_name", instance.get("pod_name"), "the pod name")
            digits = len(pod_name) - len(pod_name.rstrip("0123456789"))
            if not 0 < digits <= _MAX_DIGITS:
                self.fail(f"{where}.pod_name", pod_name, 'expected a name ending in a number: "job-pod-3"')
            pod_index = int(pod_name[-digits:])
            if pod_index in by_index:
                self.fail(f"{where}.pod_name", pod_name,
                          f"expected distinct pod indexes; {by_index[pod_index]!r} ends in {pod_index} too")
            by_index[pod_index] = pod_name
            server_id = self.text(f"{where}.server_id", instance.get("server_id"), _SERVER_ID)
            keyed.append((pod_index, server_id, pod_name,
                          self.devices(f"{where}.devices", instance.get("devices"), need_rank=False)))
        keyed.sort(key=lambda entry: entry[0])
        entries: list[_RawServer] = []
        next_rank = 0
        for _, server_id, pod_name, devices in keyed:
            entries.append((server_id, pod_name, None,
                            [(dev, ip, next_rank + i) for i, (dev, ip, _) in enumerate(devices)]))
            next_rank += len(devices)
        return _build(entries)


def _build(entries: list[_RawServer]) -> tuple[Server, ...]:
    entries = sorted(entries, key=lambda entry: min(device[2] for device in entry[3]))
    return tuple(Server(server_id, pod, host, tuple(starmap(Device, devices)))
                 for server_id, pod, host, devices in entries)


def parse_rank_table(data: object, path: str) -> RankTable:
    """Validate decoded JSON ``data`` read from ``path`` (used in messages) and return its :class:`RankTable`.

    Pure: no I/O. ``status`` must be a string but is not required to be "completed".

    Raises:
        RankTableError: the first problem found, with its JSON path inside the table and what is expected.
    """
    parser = _Parser(path)
    top = parser.obj("(top level)", data, '{"version": "1.0", "status": "completed", "server_list": [...]}')
    status = top.get("status")
    if not isinstance(status, str):
        parser.fail("status", status, 'expected a string, "completed" once the table is ready')
    version = top.get("version")
    if isinstance(version, float) and str(version) in _VERSIONS:
        version = str(version)
    if version is None and "group_list" in top:
        fmt, servers = parser.group_list(top)
        return RankTable(path=path, format=fmt, status=status, servers=servers)
    if version not in _VERSIONS:
        parser.fail("version", version, 'expected "1.0" or "1.2" with a server_list, or no version and a '
                    "group_list (legacy or ModelArts v0 table)")
    return RankTable(path=path, format=str(version), status=status, servers=parser.server_list(top))


def read_rank_table(path: str) -> RankTable:
    """Read and parse ``path`` once.

    Raises:
        RankTableNotReady: the file is missing or unreadable, is not (yet) valid JSON, or its ``status`` is a
            string other than "completed" (nothing else is checked then: the table may still be partial).
        RankTableError: the file says it is completed but is malformed, or ``path`` is a directory.
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise RankTableNotReady("the file does not exist yet") from None
    except IsADirectoryError:
        expected = f"expected a file (a directory must hold {RANK_TABLE_DIR_FILE})"
        raise RankTableError(path, "(file)", path, expected) from None
    except OSError as exc:
        raise RankTableNotReady(f"the file cannot be read: {exc.strerror or exc}") from None
    if not raw.strip():
        raise RankTableNotReady("the file is empty")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise RankTableNotReady(f"the file is not valid JSON (half-written?): {exc}") from None
    if isinstance(data, dict):
        status = data.get("status")
        if isinstance(status, str) and status != _COMPLETED:
            raise RankTableNotReady(f"status is {_shown(status)!r}, not {_COMPLETED!r}")
    return parse_rank_table(data, path)


def wait_for_rank_table(
    path: str, timeout: float, poll_interval: float = 0.5, clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep, on_wait: Optional[Callable[[str, float], None]] = None,
) -> RankTable:
    """Re-read ``path`` every ``poll_interval`` seconds until it is completed, for up to ``timeout`` seconds.

    ``timeout`` 0 means a single read. ``on_wait(reason, elapsed)`` reports progress: after the first
    not-ready read, then at most every 10 seconds.

    Raises:
        WaitTimeout: still not ready at the deadline; the hint carries the last reason.
        RankTableError: the table is completed but malformed (no point in waiting).
        ValueError: a negative ``timeout`` or a ``poll_interval`` that is not positive.
    """
    if not timeout >= 0 or not poll_interval > 0:
        raise ValueError(f"need timeout >= 0 and poll_interval > 0, got {timeout!r} and {poll_interval!r}")
    start = clock()
    deadline = start + timeout
    last_report: Optional[float] = None
    while True:
        try:
            return read_rank_table(path)
        except RankTableNotReady as exc:
            reason = exc.reason
        now = clock()
        if now >= deadline:
            raise WaitTimeout(
                what=f"rank table {path} to reach status {_COMPLETED!r}",
                waited=now - start,
                hint=f"last check: {reason}. The platform writes this file after the container starts; "
                f"check RANK_TABLE_FILE and that the job was given NPUs, or set MALAUNCH_RANK_TABLE_TIMEOUT "
                f"(seconds, now {timeout:g}) to wait longer",
            )
        if on_wait is not None and (last_report is None or now - last_report >= _PROGRESS_EVERY):
            on_wait(reason, now - start)
            last_report = now
        sleep(min(poll_interval, deadline - now))


def _describe(server: Server) -> str:
    pairs = (("host_ip", server.host_ip), ("pod", server.pod_name))
    extras = [f"{key} {value}" for key, value in pairs if value]
    return server.server_id + (f" ({', '.join(extras)})" if extras else "")


def _listing(table: RankTable, indexes: list[int]) -> str:
    shown = ", ".join(_describe(table.servers[i]) for i in indexes[:8])
    return shown + (f", and {len(indexes) - 8} more" if len(indexes) > 8 else "")


def select_server(
    table: RankTable, *, host_ip: Optional[str], instance_name: Optional[str], node_rank: Optional[int],
    num_hosts: int,
) -> int:
    """Index into ``table.servers`` of this host's server.

    Tried in order: ``instance_name`` (``MA_CURRENT_INSTANCE_NAME``) against ``pod_name``; ``host_ip``
    (``MA_CURRENT_HOST_IP``) against ``server_id`` or ``host_ip``; when neither matches, ``node_rank``
    (``VC_TASK_INDEX``) if the table has exactly ``num_hosts`` servers; then the only server of a one-server
    table. A pod-name match on a server other than the IP match is an error, and so is an IP shared by
    several servers that neither the pod name nor ``node_rank`` settles.

    Raises:
        RankTableError: no server fits; the message lists what was looked for and the candidates.
    """
    where = "server_list" if table.format in _VERSIONS else "group_list"
    given = (("MA_CURRENT_HOST_IP", host_ip), ("MA_CURRENT_INSTANCE_NAME", instance_name),
             ("VC_TASK_INDEX", node_rank), ("MA_NUM_HOSTS", num_hosts))
    sought = ", ".join(f"{name}={value}" for name, value in given if value is not None)
    servers = table.servers
    by_ip = [i for i, s in enumerate(servers) if host_ip and host_ip in (s.server_id, s.host_ip)]
    by_name = [i for i, s in enumerate(servers) if instance_name and s.pod_name == instance_name]
    fits = node_rank is not None and len(servers) == num_hosts and 0 <= node_rank < num_hosts
    by_rank = node_rank if fits else None
    if by_name:
        if by_ip and by_name[0] not in by_ip:
            raise RankTableError(table.path, where, sought, f"expected pod {instance_name} on {host_ip}, but "
                                 f"the table has it on {servers[by_name[0]].server_id}; check both variables")
        return by_name[0]
    if len(by_ip) == 1:
        return by_ip[0]
    if by_ip:
        if by_rank is not None and by_rank in by_ip:
            return by_rank
        raise RankTableError(table.path, where, sought, f"expected one server with IP {host_ip}, found "
                             f"{len(by_ip)}: {_listing(table, by_ip)}; set MA_CURRENT_INSTANCE_NAME to the "
                             "pod name")
    if by_rank is not None:
        return by_rank
    if len(servers) == 1:
        return 0
    raise RankTableError(table.path, where, sought, "expected a server whose server_id or host_ip is "
                         "MA_CURRENT_HOST_IP or whose pod_name is MA_CURRENT_INSTANCE_NAME, or exactly "
                         f"MA_NUM_HOSTS servers to pick by VC_TASK_INDEX; the table has {len(servers)}: "
                         f"{_listing(table, list(range(len(servers))))}")
