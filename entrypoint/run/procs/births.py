"""Birth records: what each process msrun starts says about itself as it is born, read when its environment is gone.

msrun names a dead worker by pid only, and the worker watch (:mod:`.watch`) learns a worker's rank from its
environment, which the kernel no longer shows once the worker is a zombie: a worker that dies within a scan or two
of its birth (a SyntaxError lives about 25 ms) would have no rank. So each process msrun starts records its rank
itself before anything else runs in it, as a fact keyed by its pid and start time (what :mod:`.proctree` names a
process by for good; ``exec`` keeps both).

How: msrun starts ``python`` from PATH, and its plan puts the birth folder first on msrun's PATH, holding a
``python`` that is a ``#!`` script of the shim's interpreter (``-I -S``: no site, no user variables; about 10 ms).
It runs :func:`main` of this module (a program as well as a module: standard library only, no import of the
package), which writes the record and then runs, by ``exec``, the ``python`` msrun would have found without that
folder: the same pid, the arguments msrun gave (``argv[0]`` ``python``) and the environment the process was born
with (read back from ``/proc/self/environ``, so nothing the interpreter set at its own start leaks in), PATH without
the birth folder (every entry whose ``python`` is this one: it never runs itself again). The worker's argv, PATH and
so ``sys.executable`` are what they were without the folder; a ``python`` the worker starts itself is the real one.

A record is the file ``<folder>/<pid>-<start>``, written to a temporary name and renamed (atomic), holding
NUL-separated ``NAME=value`` entries: :data:`MAGIC`, ``boot`` (the kernel's boot id), ``pid``, ``start``, ``ppid``
and ``pstart`` (its parent, msrun, by pid and start time), then the variables of :data:`RECORDED` it was born with.
Reading (:func:`read_birth`, :func:`births_of`) is defensive: a missing, damaged, half-written, foreign (another
boot's) or oversized record, or one that is no regular file, gives nothing, never an exception or a wait.

The folder is the plan's, the same for every attempt: the worker watch of each attempt, as it starts, removes
(:func:`prune`) every record whose parent is not one of its launchers, so a long job that restarts many times keeps
one attempt's records (about 150 bytes a process), not every attempt's.
"""

from __future__ import annotations

import os
import stat
import sys

__all__ = ["MAGIC", "RECORDED", "Birth", "births_of", "main", "prune", "read_birth", "record_birth", "without_folder"]

#: The first entry of every record (the format's name and version).
MAGIC = b"malaunch-birth=1"
#: The variables a record keeps: what the worker watch reads a rank (or msrun's scheduler) from.
RECORDED = (b"MS_NODE_ID", b"MS_ROLE", b"RANK_ID", b"RANK")
_LIMIT = 4096  # a record is a few hundred bytes: a bigger file is no record
_BOOT_ID = "/proc/sys/kernel/random/boot_id"
#: No bound of ours on the environment read back: the kernel already bounds what a process is born with (a quarter
#: of the stack limit, 2 MiB by default, more under a larger ``ulimit -s``).
_ENVIRON_LIMIT = 1 << 30


class Birth:
    """One record: the process (pid, start time), its parent as it was born (pid, start time) and what it was
    born with (``environ``: the :data:`RECORDED` variables it had, NUL-separated ``NAME=value`` as in
    ``/proc/<pid>/environ``).

    A slotted class, not a named tuple: the program imports no :mod:`typing` (5 ms of every process msrun starts).
    """

    __slots__ = ("environ", "pid", "ppid", "pstart", "start")

    def __init__(self, pid: int, start: int, ppid: int, pstart: int, environ: bytes) -> None:
        self.pid, self.start, self.ppid, self.pstart, self.environ = pid, start, ppid, pstart, environ

    def _fields(self) -> tuple[int, int, int, int, bytes]:
        return (self.pid, self.start, self.ppid, self.pstart, self.environ)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Birth) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return "Birth(pid={}, start={}, ppid={}, pstart={}, environ={!r})".format(*self._fields())


def _read(path: str, limit: int = 1 << 20) -> bytes | None:
    """The bytes of the regular file (or ``/proc`` file) ``path``, at most ``limit``; None when it cannot be read.
    Opened without blocking and without following a link: a FIFO or a link put there is never waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        parts: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
        return b"".join(parts) if size <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _start_of(pid: str) -> int | None:
    """The start time (clock ticks after boot) in ``/proc/<pid>/stat``, as :func:`.proctree.read_info` reads it."""
    raw = _read(f"/proc/{pid}/stat", 4096)
    fields = raw[raw.rfind(b")") + 2 :].split() if raw else []
    return int(fields[19]) if len(fields) >= 20 and fields[19].isdigit() else None


def _boot_id() -> bytes:
    return (_read(_BOOT_ID, 256) or b"").strip()


def _name(folder: str, pid: int, start: int) -> str:
    return os.path.join(folder, f"{pid}-{start}")


def record_birth(folder: str, environ: bytes) -> str | None:
    """Write this process's record into ``folder`` (``environ``: what it was born with); its path, or None when
    it could not be written (the process runs on all the same: its rank is then unknown to the watch)."""
    start, pstart = _start_of("self"), _start_of(str(os.getppid()))
    if start is None or pstart is None:
        return None
    kept = [item for item in environ.split(b"\0") if item.split(b"=", 1)[0] in RECORDED]
    head = [MAGIC, b"boot=" + _boot_id(), b"pid=%d" % os.getpid(), b"start=%d" % start,
            b"ppid=%d" % os.getppid(), b"pstart=%d" % pstart]  # fmt: skip
    path = _name(folder, os.getpid(), start)
    temp = os.path.join(folder, f".{os.getpid()}-{start}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, b"\0".join([*head, *kept]) + b"\0")
        finally:
            os.close(fd)
        os.rename(temp, path)
    except OSError:
        _unlink(temp)
        return None
    return path


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        return


def _parse(raw: bytes) -> Birth | None:
    items = raw.split(b"\0")
    if len(items) < 7 or items[0] != MAGIC or items[-1] != b"":  # a record ends with its NUL: else cut short
        return None
    head = dict(item.split(b"=", 1) for item in items[1:6] if b"=" in item)
    numbers = [head.get(key, b"") for key in (b"pid", b"start", b"ppid", b"pstart")]
    if len(head) != 5 or head.get(b"boot") != _boot_id() or not all(n.isdigit() for n in numbers):
        return None
    pid, start, ppid, pstart = (int(n) for n in numbers)
    kept = [item for item in items[6:-1] if item.split(b"=", 1)[0] in RECORDED and b"=" in item]
    return Birth(pid, start, ppid, pstart, b"".join(item + b"\0" for item in kept))


def read_birth(folder: str, pid: int, start: int) -> Birth | None:
    """The record of the process ``pid`` born at ``start`` (None: none, or not a whole record of it)."""
    raw = _read(_name(folder, pid, start), _LIMIT)
    birth = _parse(raw) if raw else None
    return birth if birth is not None and (birth.pid, birth.start) == (pid, start) else None


def births_of(folder: str, pid: int) -> list[Birth]:
    """Every whole record of a process numbered ``pid`` in ``folder`` (whatever its start time), oldest first."""
    try:
        names = [name for name in os.listdir(folder) if name.startswith(f"{pid}-")]
    except OSError:
        return []
    found = []
    for name in names:
        start = name[len(f"{pid}-") :]
        birth = read_birth(folder, pid, int(start)) if start.isdigit() else None
        if birth is not None:
            found.append(birth)
    return sorted(found, key=lambda birth: birth.start)


def _numbers(name: str) -> tuple[int, int] | None:
    """``(pid, start)`` of a record's name ``PID-START``; None for any other name."""
    pid, _, start = name.partition("-")
    return (int(pid), int(start)) if pid.isdigit() and start.isdigit() else None


def prune(folder: str, parents: dict[int, int]) -> int:
    """Remove from ``folder`` what no reader of this attempt can use: every record whose parent is not one of
    ``parents`` (launcher pid -> start time: an earlier attempt's msrun), every record that is no whole record of
    this boot (never readable), and the temporary file of a writer that is gone (killed while it wrote). A record
    of the current launchers stays, and so does a temporary file whose process lives (it is being written: the
    rename that makes it a record is atomic, so a record is never read half, and never removed half written);
    names of no record (the folder's ``python``) are never touched. Returns how many it removed; an unreadable
    folder is no error (nothing removed)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    removed = 0
    for name in names:
        temporary = name.startswith(".") and name.endswith(".tmp")
        numbers = _numbers(name[1:-4] if temporary else name)
        if numbers is None:
            continue
        pid, start = numbers
        if temporary:
            stale = _start_of(str(pid)) != start
        else:
            birth = read_birth(folder, pid, start)
            stale = birth is None or parents.get(birth.ppid) != birth.pstart
        if stale and os.path.lexists(os.path.join(folder, name)) and not os.path.isdir(os.path.join(folder, name)):
            _unlink(os.path.join(folder, name))
            removed += 1
    return removed


def _is_file(path: bytes, wrapper: str) -> bool:
    try:
        return os.path.samefile(path, wrapper)
    except (OSError, ValueError):
        return False


def without_folder(environ: bytes, wrapper: str) -> list[bytes]:
    """The entries of ``environ`` (NUL-separated), PATH without the folders whose ``python`` is ``wrapper`` (the
    birth folder, however spelt): the ``python`` found then is the one msrun would have found without it."""
    entries = [item for item in environ.split(b"\0") if item]
    for index, item in enumerate(entries):
        if item.startswith(b"PATH="):
            parts = item[len(b"PATH=") :].split(b":")
            kept = [part for part in parts if not _is_file(os.path.join(part or b".", b"python"), wrapper)]
            entries[index] = b"PATH=" + b":".join(kept)
            break
    return entries


def main(wrapper: str, args: list[str]) -> int:
    """The program msrun starts as ``python ARGS...`` (``wrapper``: the birth folder's ``python`` that runs it):
    record, then ``exec`` the real ``python`` (see the module's docstring). Returns only when that cannot be run:
    127 (not found) or 126, as a shell would; 126 too without ``/proc`` (the shim's watch needs it as well): the
    environment the process was born with is read from there."""
    folder = os.path.dirname(os.path.abspath(wrapper))
    born = _read("/proc/self/environ", _ENVIRON_LIMIT)
    if born is None:
        sys.stderr.write(f"python: cannot read /proc/self/environ (is /proc mounted?), so {wrapper} cannot run the "
                         "python on PATH after it with this process's environment; mount /proc\n")  # fmt: skip
        return 126
    record_birth(folder, born)
    env = dict(item.split(b"=", 1) for item in without_folder(born, wrapper) if b"=" in item)
    try:
        os.execvpe("python", ["python", *args], env)
    except OSError as error:
        sys.stderr.write(f"python: cannot run the python on PATH after {folder}: {error}\n")
        return 127 if isinstance(error, FileNotFoundError) else 126
    return 126  # not reached: exec replaced this program
