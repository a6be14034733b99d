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
4. A malformed table raises :class:`~malaunch.entrypoint.contract.errors.RankTableError` whose ``where`` is a JSON
   path inside the table, such as ``server_list[1].device[0].rank_id``.

The platform writes the file asynchronously (a ConfigMap replaced through symlinks), so
:func:`wait_for_rank_table` re-reads it on every poll and treats a missing file, a truncated file (JSON that
the rest of the file could still complete) or a status other than "completed" as not ready yet
(:class:`RankTableNotReady`) until its deadline. What can never become valid is an error at once
(:class:`~malaunch.entrypoint.contract.errors.RankTableError`, exit 2): a FIFO, device or socket instead of a regular
file (never opened in a way that blocks), a file over :data:`MAX_RANK_TABLE_BYTES`, a symlink loop, a file the
shim may not read (permissions), bytes
that are not UTF-8, JSON broken before its end, nesting deeper than the interpreter allows, or an integer of
more than 20 digits.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from json import JSONDecodeError
from operator import attrgetter
from typing import TYPE_CHECKING, Callable, Optional

from ...contract.errors import ConfigError, RankTableError, WaitTimeout, shorten
from .. import jsontext
from ._parse import COMPLETED, Device, RankTable, Server, no_gc, parse_rank_table, shown
from ._parts import decode_by_parts

if TYPE_CHECKING:
    from json import JSONDecodeError

__all__ = [
    "MAX_RANK_TABLE_BYTES", "RANK_TABLE_DIR_FILE", "Device", "RankTable", "RankTableNotReady", "Server",
    "parse_rank_table", "read_rank_table", "resolve_rank_table_path", "select_server", "wait_for_rank_table",
]

#: The file inside ``RANK_TABLE_FILE`` when that variable names a directory (ModelArts convention).
RANK_TABLE_DIR_FILE = "jobstart_hccl.json"
#: A rank table larger than this is refused (a 32,768-rank v1.0 table is about 2.5 MB).
MAX_RANK_TABLE_BYTES = 64 * 1024 * 1024
_PROGRESS_EVERY = 10.0  # seconds between on_wait calls
_MAX_INT_DIGITS = 20
_BOM = b"\xef\xbb\xbf"  # UTF-8's byte order mark, which a table may start with
_PERMANENT_ERRNOS = (errno.ELOOP, errno.ENAMETOOLONG, errno.ENOTDIR, errno.EACCES, errno.EPERM)
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


class RankTableNotReady(Exception):
    """Internal signal: the file is not usable *yet* (missing, half-written, not completed): ``reason``.

    ``where`` and ``value`` say what was seen (``"status"`` and its value, or ``"(file)"`` and the path), for a
    caller that will not wait (``--dry-run``) and reports it as an error.
    """

    def __init__(self, reason: str, where: str = "(file)", value: object = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.where = where
        self.value = value


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


def _refuse(path: str, expected: str) -> RankTableError:
    return RankTableError(path, "(file)", shorten(path), expected)


def _unreadable(path: str, exc: OSError) -> Exception:
    """Why ``path`` could not be looked at or opened: not there yet or passing (wait), or never readable (refuse)."""
    if isinstance(exc, FileNotFoundError):
        return RankTableNotReady("the file does not exist yet", "(file)", path)
    if exc.errno in _PERMANENT_ERRNOS:
        return _refuse(path, f"expected a readable file, got: {exc.strerror}; fix RANK_TABLE_FILE")
    return RankTableNotReady(f"the file cannot be read: {exc.strerror or exc}", "(file)", path)


def _read_bytes(path: str) -> bytes:
    """The file's bytes; only a regular file is ever opened, and never in a way that can block."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise _unreadable(path, exc) from None
    if stat.S_ISDIR(info.st_mode):
        raise _refuse(path, f"expected a file (a directory must hold {RANK_TABLE_DIR_FILE})")
    _check_regular(path, info)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _unreadable(path, exc) from None
    try:
        opened = os.fstat(fd)
        _check_regular(path, opened)  # it may have been swapped since the stat
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_RANK_TABLE_BYTES:  # one read when the size is right; more if the file grows meanwhile
            chunk = os.read(fd, min(max(opened.st_size + 1, 1 << 16), MAX_RANK_TABLE_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise RankTableNotReady(f"the file cannot be read: {exc.strerror or exc}", "(file)", path) from None
    finally:
        os.close(fd)
    if size > MAX_RANK_TABLE_BYTES:
        raise _refuse(path, f"expected at most {MAX_RANK_TABLE_BYTES // (1 << 20)} MiB; the file grew past that "
                      "while it was read")
    return b"".join(chunks)


def _check_regular(path: str, info: os.stat_result) -> None:
    if info.st_size > MAX_RANK_TABLE_BYTES:
        raise _refuse(path, f"expected at most {MAX_RANK_TABLE_BYTES // (1 << 20)} MiB, the file has {info.st_size} "
                      "bytes; point RANK_TABLE_FILE at the rank table")
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
        raise _refuse(path, f"expected a regular file, found {kind}; point RANK_TABLE_FILE at the rank table")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        raise _NumberTooLong(len(text))
    return int(text)


class _NumberTooLong(ValueError):
    def __init__(self, digits: int) -> None:
        super().__init__(digits)
        self.digits = digits


def _decode(raw: bytes, path: str) -> object:
    """Decoded JSON, its ``server_list`` possibly already checked and built (:mod:`._parts`); RankTableNotReady if
    the text may still be completed (or is blank), RankTableError if it never can. Pass the bytes as a temporary
    (``_decode(_read_bytes(path), path)``): they are dropped once decoded to text, so a large table is not held
    twice while its objects are built."""
    if not raw or raw.isspace():  # not raw.strip(), which copies a table that ends in a newline
        raise RankTableNotReady("the file is empty")
    if raw.startswith(_BOM):  # as "utf-8-sig" decodes (positions in errors counted after it), without that codec
        raw = raw[3:]
    with no_gc():
        by_parts = decode_by_parts(raw, _bounded_int)  # a large server_list, without holding it all decoded
    if by_parts is not None:
        return by_parts
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data" and exc.end == len(raw):
            raise RankTableNotReady("the file ends inside a UTF-8 character (half-written?)") from None
        raise RankTableError(path, f"(byte {exc.start})", raw[exc.start:exc.start + 8],
                             "expected UTF-8 text: the file is not UTF-8 and cannot become a rank table") from None
    del raw
    try:
        with no_gc():
            return jsontext.loads(text, integer=_bounded_int)
    except RecursionError:
        raise RankTableError(path, "(top level)", "<deeply nested>", "expected a rank table, found JSON "
                             "nested too deeply to read (a rank table is 5 levels deep)") from None
    except _NumberTooLong as exc:
        raise RankTableError(path, "(number)", f"<{exc.digits} digits>",
                             f"expected numbers of at most {_MAX_INT_DIGITS} digits") from None
    except ValueError as exc:
        if not isinstance(exc, JSONDecodeError):  # e.g. the interpreter's int digit limit
            raise RankTableError(path, "(number)", shown(str(exc)), "expected a valid JSON number") from None
        if _truncated(text, exc):
            raise RankTableNotReady(f"the file is not complete JSON yet (half-written?): {exc}") from None
        raise RankTableError(path, f"(line {exc.lineno} column {exc.colno})", shown(text[exc.pos:exc.pos + 40]),
                             f"expected JSON ({exc.msg}); the error is before the end of the file, so it is not "
                             "half-written and waiting cannot fix it") from None


_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")
_NUMBER_TAIL = frozenset("0123456789.eE+-")


def _truncated(text: str, error: JSONDecodeError) -> bool:
    """Whether ``text`` may be the start of valid JSON, given the decoder's ``error`` (i.e. it stops early).

    The decoder reports an error at the token where it failed; the text is a truncation when that token
    runs to the end of the text unfinished: an unterminated string, a literal or number cut short, or nothing.
    """
    rest = text[error.pos:].rstrip()
    if not rest or error.msg.startswith("Unterminated string"):
        return True
    if error.msg == "Expecting value":
        return any(literal.startswith(rest) for literal in _LITERALS) or rest == "-"
    if error.msg.startswith(("Expecting ',' delimiter", "Expecting ':' delimiter")):  # a number cut short: "1." "1e"
        before = text[error.pos - 1:error.pos]
        return before.isdigit() and rest[0] in ".eE" and _NUMBER_TAIL.issuperset(rest)
    if error.msg.startswith("Invalid \\uXXXX escape"):
        return len(rest) < 6 and all(ch in "0123456789abcdefABCDEF" for ch in rest[2:])
    return False


def read_rank_table(path: str) -> RankTable:
    """Read and parse ``path`` once.

    The cyclic garbage collector is paused for the whole read (decoding, parsing and freeing the decoded JSON, which
    holds no cycles), and the file's bytes are dropped once decoded to text, so a large table is never held twice.

    Raises:
        RankTableNotReady: the file is missing or unreadable, is a truncated JSON text, or its ``status`` is a
            string other than "completed" (nothing else is checked then: the table may still be partial).
        RankTableError: the file can never become a rank table (see the module docstring), or it says it is
            completed but is malformed.
    """
    with no_gc():  # one pause for decoding, parsing and freeing: the collector never walks the decoded JSON
        data = _decode(_read_bytes(path), path)
        if isinstance(data, dict):
            status = data.get("status")
            if isinstance(status, str) and status != COMPLETED:
                raise RankTableNotReady(f"status is {shown(status)!r}, not {COMPLETED!r}", "status", shown(status))
        table = parse_rank_table(data, path)
        del data
    return table


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
                what=f"rank table {shorten(path)} to reach status {COMPLETED!r}",
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


def _matches(servers: tuple[Server, ...], value: Optional[str], *fields: str) -> list[int]:
    """Indexes, in order, of the servers with ``value`` in one of ``fields`` (none for an empty value); each field
    is searched as one column with ``list.index``, not by a Python loop over thousands of servers."""
    found: set[int] = set()
    for field in fields if value else ():
        column = list(map(attrgetter(field), servers))
        at = -1
        try:
            while True:
                at = column.index(value, at + 1)
                found.add(at)
        except ValueError:  # no further match
            pass
    return sorted(found)


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
    where = "server_list" if table.format in ("1.0", "1.2") else "group_list"
    given = (("MA_CURRENT_HOST_IP", host_ip), ("MA_CURRENT_INSTANCE_NAME", instance_name),
             ("VC_TASK_INDEX", node_rank), ("MA_NUM_HOSTS", num_hosts))
    sought = ", ".join(f"{name}={value}" for name, value in given if value is not None)
    servers = table.servers
    by_ip = _matches(servers, host_ip, "server_id", "host_ip")
    by_name = _matches(servers, instance_name, "pod_name")
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
