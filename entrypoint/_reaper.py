"""Process-tree cleanup for the supervisor: find a run's processes, kill them, and outlive the shim.

Every process the shim starts gets ``MALAUNCH_SHIM_TOKEN=<token>`` in its environment, and every descendant
inherits it, including workers that torchrun and msrun put in sessions of their own and grandchildren that
call ``setsid`` (pytorch#113231, #110065, dlrover#1331: orphaned workers keep holding accelerators). A scan of
``/proc/<pid>/environ`` therefore finds the whole tree, whichever process group or parent it ended up in.
Zombies have an empty ``environ``, so a scan never reports a process that is already dead.

:func:`start_watchdog` forks a small process that kills that tree if the shim dies without saying "done"
(the shim itself may be SIGKILLed, and then no ``finally`` runs). :func:`set_subreaper` makes orphans of a
dying launcher reparent to the shim instead of PID 1, so the shim can reap them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

__all__ = [
    "TOKEN_VAR",
    "Watchdog",
    "child_pids",
    "is_alive",
    "kill_tree",
    "new_token",
    "reap_zombie_children",
    "restore_subreaper",
    "scan_ranks",
    "zombie_returncode",
    "set_subreaper",
    "signal_groups",
    "signal_pids",
    "start_watchdog",
    "stop_tree",
    "sweep",
    "token_pids",
]

TOKEN_VAR = "MALAUNCH_SHIM_TOKEN"
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_TEARDOWN_POLL = 0.01
_KILL_PATIENCE = 10.0  # a process that survives SIGKILL this long is stuck in the kernel


def new_token() -> str:
    """A token unique to one run (the pid keeps two shims on one host apart even with a weak RNG)."""
    return f"{os.getpid()}-{os.urandom(12).hex()}"


def _read(path: str, limit: int = 1 << 20) -> Optional[bytes]:
    # os.open/os.read only: this also runs in the forked watchdog, where io objects are best avoided.
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


def _all_pids() -> List[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _has_token(environ: bytes, needle: bytes) -> bool:
    # Entries are NUL-terminated "KEY=VALUE" strings; compare whole entries only.
    return environ.startswith(needle) or (b"\0" + needle) in environ


def token_pids(token: str, exclude: Iterable[int] = ()) -> List[int]:
    """Live processes whose environment carries this run's token (never this process)."""
    needle = f"{TOKEN_VAR}={token}\0".encode()
    skip = {os.getpid(), *exclude}
    found = []
    for pid in _all_pids():
        if pid in skip:
            continue
        environ = _read(f"/proc/{pid}/environ")
        if environ and _has_token(environ, needle):
            found.append(pid)
    return found


def scan_ranks(token: str, known: Dict[int, int], skip: Set[int]) -> None:
    """Add ``pid -> rank`` to ``known`` for new token processes that carry ``MS_NODE_ID``, ``RANK_ID`` or ``RANK``.

    msrun's scheduler has ``RANK_ID=0`` too but ``MS_ROLE=MS_SCHED``; it is skipped. Pids without the token
    are added to ``skip`` so that they are read once only; token pids without a rank are read again, since a
    worker forked but not yet exec'd still shows its launcher's environment.
    """
    needle = f"{TOKEN_VAR}={token}\0".encode()
    me = os.getpid()
    pids = _all_pids()
    skip.intersection_update(pids)  # forget dead pids, so that a reused pid is read again
    for pid in pids:
        if pid == me or pid in known or pid in skip:
            continue
        environ = _read(f"/proc/{pid}/environ")
        if not environ:
            continue
        if not _has_token(environ, needle):
            skip.add(pid)
            continue
        values = dict(item.partition(b"=")[::2] for item in environ.split(b"\0") if item)
        raw = values.get(b"MS_NODE_ID") or (
            (values.get(b"RANK_ID") or values.get(b"RANK")) if values.get(b"MS_ROLE") != b"MS_SCHED" else None
        )
        if raw is not None and raw.strip().isdigit():
            known[pid] = int(raw)


def _stat(pid: int) -> Optional[Tuple[str, int]]:
    """(state letter, parent pid) from ``/proc/<pid>/stat``; None when the process is gone."""
    raw = _read(f"/proc/{pid}/stat", 4096)
    if not raw:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()  # the command name may hold spaces and parentheses
    if len(fields) < 2:
        return None
    return fields[0].decode("ascii", "replace"), int(fields[1])


def zombie_returncode(pid: int) -> Optional[int]:
    """Exit status of a zombie that its parent has not reaped yet, Popen-style (-N for signal N); else None.

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


def is_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    info = _stat(pid)
    return info is not None and info[0] not in ("Z", "X")


def child_pids() -> Set[int]:
    """Pids whose parent is this process (zombies included)."""
    me = os.getpid()
    found = set()
    for pid in _all_pids():
        info = _stat(pid)
        if info is not None and info[1] == me:
            found.add(pid)
    return found


def reap_zombie_children(keep: Set[int]) -> None:
    """Reap dead children that nobody else waits for: orphans that reparented to us as subreaper."""
    me = os.getpid()
    for pid in _all_pids():
        if pid in keep:
            continue
        info = _stat(pid)
        if info is not None and info[1] == me and info[0] in ("Z", "X"):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def signal_pids(pids: Iterable[int], sig: int) -> None:
    """Send ``sig`` to each pid; processes that are gone or not ours are skipped."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def signal_groups(pgids: Iterable[int], sig: int) -> None:
    """Send ``sig`` to each process group; empty groups are skipped."""
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)


_libc: Optional[ctypes.CDLL] = None


def _prctl(option: int, value: int) -> Optional[int]:
    """prctl(option, value) or, for the GET option, the value read; None when unavailable."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        if option == _PR_GET_CHILD_SUBREAPER:
            out = ctypes.c_int(0)
            rc = _libc.prctl(option, ctypes.byref(out), 0, 0, 0)
            return out.value if rc == 0 else None
        rc = _libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0)
        return value if rc == 0 else None
    except (OSError, AttributeError):
        return None


def set_subreaper() -> Optional[int]:
    """Make this process the child subreaper; returns the previous setting, None if unsupported."""
    previous = _prctl(_PR_GET_CHILD_SUBREAPER, 0)
    if previous is None or _prctl(_PR_SET_CHILD_SUBREAPER, 1) is None:
        return None
    return previous


def restore_subreaper(previous: Optional[int]) -> None:
    """Undo :func:`set_subreaper` (a no-op when it had not succeeded)."""
    if previous is not None:
        _prctl(_PR_SET_CHILD_SUBREAPER, previous)


def kill_tree(token: str, pgids: Iterable[int], grace: float, exclude: Iterable[int] = ()) -> None:
    """SIGTERM the groups and every token process, wait up to ``grace``, then SIGKILL until none is left."""
    groups = list(pgids)
    signal_groups(groups, signal.SIGTERM)
    signal_pids(token_pids(token, exclude), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if not token_pids(token, exclude):
            break
    for _ in range(100):
        signal_groups(groups, signal.SIGKILL)
        left = token_pids(token, exclude)
        if not left:
            return
        signal_pids(left, signal.SIGKILL)
        time.sleep(0.05)


def stop_tree(
    groups: List[int],
    token: str,
    exclude: Set[int],
    sig: int,
    grace: float,
    all_exited: Callable[[], bool],
    wait: Callable[[float], bool],
    warn: Callable[[str], None],
) -> None:
    """Send ``sig`` to the groups and to every token process, SIGKILL after ``grace``, until none is left.

    ``all_exited`` says whether the supervisor has reaped every direct child; ``wait(timeout)`` waits for the
    supervisor's events and returns True when a second signal asks to skip the rest of the grace period.
    Token processes that appear during the grace period get ``sig`` too.
    """
    signal_groups(groups, sig)
    signalled: Set[int] = set()
    deadline = time.monotonic() + grace
    escalate = False
    while True:
        left = token_pids(token, exclude)
        fresh = [pid for pid in left if pid not in signalled]
        signal_pids(fresh, sig)
        signalled.update(fresh)
        if not left and all_exited():
            return
        if escalate or time.monotonic() >= deadline:
            break
        escalate = wait(_TEARDOWN_POLL)
    give_up = time.monotonic() + _KILL_PATIENCE
    while True:
        signal_groups(groups, signal.SIGKILL)
        signal_pids(token_pids(token, exclude), signal.SIGKILL)
        wait(0.02)
        left = token_pids(token, exclude)
        if not left and all_exited():
            return
        if time.monotonic() > give_up:
            warn(f"processes {left or 'of the plan'} survived SIGKILL (stuck in the kernel?)")
            return


def sweep(token: str, exclude: Set[int]) -> None:
    """SIGKILL any token process still there (the last step of every run)."""
    for _ in range(50):
        left = token_pids(token, exclude)
        if not left:
            return
        signal_pids(left, signal.SIGKILL)
        time.sleep(0.02)


class Watchdog:
    """The shim's end of the watchdog pipe: announce process groups, then say "done"."""

    def __init__(self, pid: int, write_fd: int) -> None:
        self.pid = pid
        self._fd: Optional[int] = write_fd

    def _send(self, message: bytes) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):  # the watchdog is gone: nothing to tell
            os.write(self._fd, message)

    def announce_groups(self, pgids: Iterable[int]) -> None:
        """Tell the watchdog which process groups to kill as well, should the shim die."""
        self._send(b"".join(b"pg %d\n" % pgid for pgid in pgids))

    def finish(self) -> None:
        """Normal completion: the watchdog exits without killing anything, and is reaped."""
        if self._fd is None:
            return
        self._send(b"done\n")
        os.close(self._fd)
        self._fd = None
        deadline = time.monotonic() + 5.0
        while True:
            try:
                pid, _ = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return
            if pid or time.monotonic() > deadline:
                break
            time.sleep(0.002)
        if not pid:  # wedged (should not happen): do not leave it behind
            signal_pids([self.pid], signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)


def start_watchdog(token: str, grace: float) -> Watchdog:
    """Fork the watchdog. Call before the shim starts any thread: the child runs only ``os`` calls."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the forked child, which always leaves through os._exit
        try:
            _watchdog_main(read_fd, token, grace)
        finally:
            os._exit(0)
    os.close(read_fd)
    return Watchdog(pid, write_fd)


def _watchdog_main(read_fd: int, token: str, grace: float) -> None:  # pragma: no cover - forked child
    os.setsid()  # out of the shim's group and session: a signal to those must not reach us
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for name in os.listdir("/proc/self/fd"):  # the pipe's write end included: EOF must mean "shim gone"
        fd = int(name)
        if fd != read_fd:
            with contextlib.suppress(OSError):
                os.close(fd)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        if fd != null and fd != read_fd:
            os.dup2(null, fd)
    buffer = b""
    groups: List[int] = []
    while True:
        try:
            chunk = os.read(read_fd, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line == b"done":
                return
            if line.startswith(b"pg "):
                groups.append(int(line[3:]))
    kill_tree(token, groups, grace)

