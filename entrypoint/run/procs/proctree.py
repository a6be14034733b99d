"""The one process-tree module: ``/proc`` scans, start times, ownership proof, kill loops, reaping.

Used by the shim's supervisor and watchdog, by the SDK's local backend, by the tests and by the benchmarks, so
that "which processes are the job's" and "how they are ended" have one answer. Standard library only, and
only ``os`` calls on the paths the forked watchdog runs.

Ownership is *proven*, never assumed: a process is the job's when its environment carries the job's token
(``NAME=value``) or when it descends from the supervisor, and it is signalled only if it is still that same
process. :func:`signal_proven` opens a pidfd first (Linux 5.3+), re-reads the start time and the proof through
``/proc``, then signals through the pidfd: a pid reused in between is never hit. A process whose ``/proc``
entries cannot be read (another user's) is never signalled. The shim's own process settings (the subreaper, its name,
the stop-signal handlers) are :mod:`.selfproc`'s.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import time
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Set, TypeAlias

__all__ = [
    "ProcInfo",
    "ProcKey",
    "all_pids",
    "descendants",
    "env_has",
    "env_value",
    "env_values",
    "has_children",
    "is_alive",
    "keys_of",
    "kill_loop",
    "listed_children",
    "pidfd_exit_status",
    "pidfd_open",
    "pids_with_env",
    "read_environ",
    "read_info",
    "read_usage",
    "reap_zombie_children",
    "signal_proven",
    "snapshot",
    "zombie_returncode",
]

# struct pidfd_info (linux/pidfd.h), version 0: 64 bytes, exit_code at offset 60; _IOWR(0xFF, 11, 64 bytes)
_PIDFD_INFO_SIZE = 64
_PIDFD_INFO_EXIT = 1 << 3
_PIDFD_INFO_EXIT_CODE = 60
_PIDFD_GET_INFO = (3 << 30) | (_PIDFD_INFO_SIZE << 16) | (0xFF << 8) | 11
Proof: TypeAlias = "Callable[[int], bool]"


class ProcInfo(NamedTuple):
    """One line of ``/proc/<pid>/stat``: what a scan needs."""

    pid: int
    ppid: int
    pgid: int
    state: str  # R, S, D, Z, ...
    start: int  # clock ticks after boot: with the pid, names one process for good
    session: int = 0  # its session id

    @property
    def zombie(self) -> bool:
        """Exited, not yet reaped."""
        return self.state in ("Z", "X", "x")


class ProcKey(NamedTuple):
    """A process named for good: pid plus start time (a reused pid has a later start)."""

    pid: int
    start: int


def _read(path: str, limit: int = 1 << 20) -> Optional[bytes]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        parts: List[bytes] = []
        size = 0
        while size < limit:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
        return b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


def all_pids() -> List[int]:
    """Every pid in ``/proc`` right now."""
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def read_info(pid: int) -> Optional[ProcInfo]:
    """``/proc/<pid>/stat`` parsed; None when the process is gone (or ``/proc`` is unreadable)."""
    raw = _read(f"/proc/{pid}/stat", 4096)
    if not raw:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()  # the command name may hold spaces and parentheses
    if len(fields) < 20:
        return None
    try:
        ppid, pgid, session, start = (int(fields[index]) for index in (1, 2, 3, 19))
    except ValueError:
        return None
    return ProcInfo(pid, ppid, pgid, fields[0].decode("ascii", "replace"), start, session)


def read_usage(pid: int) -> Optional[tuple[int, int]]:
    """``(CPU clock ticks used so far, resident bytes)`` of ``pid`` from ``/proc/<pid>/stat``; None when gone."""
    raw = _read(f"/proc/{pid}/stat", 4096)
    if not raw:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    if len(fields) < 22:
        return None
    try:
        return int(fields[11]) + int(fields[12]), int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def snapshot() -> Dict[int, ProcInfo]:
    """``pid -> ProcInfo`` for every process that could be read."""
    found = {}
    for pid in all_pids():
        info = read_info(pid)
        if info is not None:
            found[pid] = info
    return found


def is_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    info = read_info(pid)
    return info is not None and not info.zombie


def zombie_returncode(pid: int) -> Optional[int]:
    """Exit status of a zombie its parent has not reaped, Popen-style (-N for signal N); else None.

    ``/proc/<pid>/stat`` field 52 holds the wait status once the process has exited (Linux 3.5 and later).
    """
    raw = _read(f"/proc/{pid}/stat", 4096)
    if not raw:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    if len(fields) < 50 or fields[0] != b"Z":
        return None
    status = int(fields[49])
    return -(status & 0x7F) if status & 0x7F else (status >> 8) & 0xFF


def pidfd_exit_status(fd: int) -> Optional[int]:
    """Exit status, Popen-style, of the process behind pidfd ``fd`` once its parent has reaped it; else None.

    ``ioctl(PIDFD_GET_INFO)`` with ``PIDFD_INFO_EXIT`` (Linux 6.15+) keeps the status for every holder of a
    pidfd, so a death is known even when another process (the launcher) reaped the zombie first. None on older
    kernels, for a process not reaped yet (read :func:`zombie_returncode` then) or on any error.
    """
    buffer = bytearray(_PIDFD_INFO_SIZE)

    struct.pack_into("=Q", buffer, 0, _PIDFD_INFO_EXIT)
    try:
        fcntl.ioctl(fd, _PIDFD_GET_INFO, buffer, True)
    except OSError:
        return None
    (mask,) = struct.unpack_from("=Q", buffer, 0)
    if not mask & _PIDFD_INFO_EXIT:
        return None
    (status,) = struct.unpack_from("=i", buffer, _PIDFD_INFO_EXIT_CODE)
    try:
        return os.waitstatus_to_exitcode(status)
    except ValueError:
        return None


def read_environ(pid: int) -> Optional[bytes]:
    """The raw NUL-separated environment; None when unreadable (gone, a zombie, or another user's)."""
    return _read(f"/proc/{pid}/environ")


def env_has(environ: bytes, name: str, value: str) -> bool:
    """True when ``environ`` holds exactly the entry ``name=value``."""
    needle = f"{name}={value}\0".encode()
    if not environ.endswith(b"\0"):
        environ += b"\0"
    return environ.startswith(needle) or (b"\0" + needle) in environ


def env_value(environ: bytes, name: str) -> Optional[bytes]:
    """The value of ``name`` in ``environ``, or None."""
    key = name.encode() + b"="
    for item in environ.split(b"\0"):
        if item.startswith(key):
            return item[len(key) :]
    return None


def env_values(name: str) -> Set[str]:
    """The values of ``name`` that live processes carry in their environment (never this process's own; a
    process whose environment cannot be read carries none)."""
    me, found = os.getpid(), set()
    for pid in all_pids():
        environ = read_environ(pid) if pid != me else None
        value = env_value(environ, name) if environ else None
        if value is not None:
            found.add(value.decode(errors="replace"))
    return found


def pids_with_env(name: str, value: str, exclude: Iterable[int] = ()) -> List[ProcKey]:
    """Live processes whose environment carries ``name=value`` (never this process, never a zombie)."""
    skip = {os.getpid(), *exclude}
    found = []
    for pid in all_pids():
        if pid in skip:
            continue
        environ = read_environ(pid)
        if not environ or not env_has(environ, name, value):
            continue
        info = read_info(pid)
        if info is not None and not info.zombie:
            found.append(ProcKey(pid, info.start))
    return found


def descendants(root: int, snap: Optional[Dict[int, ProcInfo]] = None) -> List[ProcInfo]:
    """Every process below ``root`` in the parent tree (zombies included), children before grandchildren."""
    table = snapshot() if snap is None else snap
    below: Dict[int, List[ProcInfo]] = {}
    for info in table.values():
        below.setdefault(info.ppid, []).append(info)
    found: List[ProcInfo] = []
    queue = [root]
    seen: Set[int] = {root}
    while queue:
        for info in below.get(queue.pop(0), ()):
            if info.pid not in seen:
                seen.add(info.pid)
                found.append(info)
                queue.append(info.pid)
    return found


def has_children() -> bool:
    """Whether this process has any child right now (running or a zombie), found without scanning ``/proc``.

    ``waitid(P_ALL, WNOHANG | WNOWAIT)`` fails with ECHILD exactly when there is no child, and reaps nothing.
    True when the call is unavailable, so a caller falls back to a scan.
    """
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    except (AttributeError, OSError):
        return True
    return True


def pidfd_open(pid: int) -> Optional[int]:
    """A pidfd for ``pid`` (it names that process even after its pid is reused), or None where unavailable."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def keys_of(pids: Dict[int, int]) -> Dict[int, ProcKey]:
    """Each process of ``pids`` (plan index -> pid) named for good, its start read now; one already gone is left
    out, so that nothing is ever sent to its pid."""
    infos = {name: read_info(pid) for name, pid in pids.items()}
    return {name: ProcKey(info.pid, info.start) for name, info in infos.items() if info is not None}


def signal_proven(key: ProcKey, sig: int, proof: Optional[Proof] = None) -> bool:
    """Send ``sig`` to ``key`` only if it is still that process (same start) and ``proof(pid)`` holds.

    Returns True when the signal was sent. With pidfds (Linux 5.3+) there is no window for pid reuse.
    """
    fd = pidfd_open(key.pid)
    try:
        info = read_info(key.pid)
        if info is None or info.start != key.start:
            return False
        if proof is not None and not proof(key.pid):
            return False
        sender = getattr(signal, "pidfd_send_signal", None)
        if fd is not None and sender is not None:
            sender(fd, sig)
        else:
            os.kill(key.pid, sig)
        return True
    except OSError:  # gone, or not ours to signal
        return False
    finally:
        if fd is not None:
            os.close(fd)


def kill_loop(
    find: Callable[[], List[ProcKey]],
    grace: float,
    *,
    sig: int = signal.SIGTERM,
    patience: float = 10.0,
    proof: Optional[Proof] = None,
    wait: Optional[Callable[[float], bool]] = None,
    on_kill: Callable[[], None] = lambda: None,
) -> List[int]:
    """``sig`` to all ``find()`` returns (newcomers too), SIGKILL after ``grace``, until none is left.

    ``wait(seconds)`` sleeps and may return True to skip the rest of the grace period; ``on_kill`` runs once
    when SIGKILL starts. Returns the pids that survived ``patience`` seconds of SIGKILL (normally none).
    """
    pause = wait if wait is not None else _sleep
    deadline = time.monotonic() + grace
    signalled: Set[ProcKey] = set()
    while True:
        left = find()
        if not left:
            return []
        for key in left:
            if key not in signalled:
                signal_proven(key, sig, proof)
                signalled.add(key)
        if time.monotonic() >= deadline or pause(0.02):
            break
    on_kill()
    give_up = time.monotonic() + patience
    while True:
        left = find()
        if not left:
            return []
        if time.monotonic() > give_up:
            return [key.pid for key in left]
        for key in left:
            signal_proven(key, signal.SIGKILL, proof)
        pause(0.02)


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False


def listed_children() -> Optional[Set[int]]:
    """This process's children (running or zombies) from each of its threads' ``/proc`` ``children`` list; None
    where the kernel keeps no such list (built without ``CONFIG_PROC_CHILDREN``)."""
    found: Set[int] = set()
    for thread in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{thread}/children", "rb") as listing:
                found.update(int(word) for word in listing.read().split())
        except FileNotFoundError:
            if os.path.isdir(f"/proc/self/task/{thread}"):
                return None  # the thread is there, its list is not: the kernel keeps none
        except OSError:
            return None
    return found


def reap_zombie_children(keep: Iterable[int] = ()) -> List[int]:
    """Reap dead children that nobody else waits for (orphans that came to us as subreaper): of the kernel's list
    of this process's children (:func:`listed_children`), else of every process, those whose stat says so."""
    me, skip, reaped, listed = os.getpid(), set(keep), [], listed_children()
    for pid in sorted(listed) if listed is not None else all_pids():
        if pid in skip:
            continue
        info = read_info(pid)
        if info is not None and info.ppid == me and info.zombie:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0]:
                    reaped.append(pid)
    return reaped
