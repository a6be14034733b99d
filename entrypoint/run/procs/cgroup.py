"""A cgroup of the job's own, when the kernel lets the shim make one: containment no process can leave.

The shim creates ``malaunch-<token>`` below its own cgroup (cgroup v2 when mounted, else the v1 ``pids`` or
``freezer`` hierarchy) and moves every process it starts into it right after starting it; everything they
start is born inside. A process can leave its session, its parent and its environment behind, not its cgroup
(only a privileged process that writes itself elsewhere can). At the end every member is killed (``cgroup.kill``
where the kernel has it, else SIGKILL to each member, proven by membership) and the cgroup is removed; the
watchdog does the same if the shim dies.

The ranks are born inside where the kernel allows it: :class:`CgroupEntry` makes the cgroup while the shim is
still starting up (once its plan is known) and moves the shim itself in on a thread of its own. The kernel's
first move into a new cgroup waits for an RCU grace period (~8 ms) that the thread sleeps through while the shim
finishes starting; the shim waits for it before its first ``Popen`` and moves itself back out right after its
last (its watchdog was started before the cgroup was made: it is never inside). So no rank can fork a daemon
before it is inside: a shim SIGKILLed in its first milliseconds still leaves nothing the watchdog cannot find.
Where the move fails, the ranks are moved in right after they started, as before (a rank that forks in that
window can leave a process outside).

When the cgroup cannot be created (read-only ``/sys/fs/cgroup``, no permission, no cgroup filesystem) nothing
changes: the shim still finds the job's processes by their token and as its descendants (it is the subreaper).

The cgroup's name records its owner: ``malaunch-<token>-<start>-<pidns>`` (the token starts with the shim's pid;
``start`` is the shim's start time in clock ticks after boot, ``pidns`` the inode of its pid namespace). A shim
SIGKILLed with its watchdog (or one whose watchdog could not start) leaves its cgroup behind; :func:`sweep_strays`
(run by every shim when its run ends, and by a watchdog that ended a job) removes every empty ``malaunch-*``
cgroup beside its own whose owner is proven gone: same pid namespace, and no process with that pid and start
time. It never signals anything and never touches a cgroup whose name does not prove its owner (made by an older
shim, or in another pid namespace).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import Callable, List, Optional

from . import proctree

__all__ = [
    "CgroupEntry",
    "JobCgroup",
    "cgroup_name",
    "kill_members",
    "members",
    "remove",
    "stray_owner",
    "sweep_strays",
]

_ROOT = "/sys/fs/cgroup"
_V1_CONTROLLERS = ("pids", "freezer")


def _own_cgroup_dirs() -> List[str]:
    """Candidate directories of this process's own cgroup, best first."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    found: List[str] = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        path = path.lstrip("/")
        if hierarchy == "0" and not controllers:
            for base in (_ROOT, os.path.join(_ROOT, "unified")):
                if os.path.exists(os.path.join(base, "cgroup.controllers")):
                    found.insert(0, os.path.join(base, path))
                    break
        for name in _V1_CONTROLLERS:
            if name in controllers.split(","):
                found.append(os.path.join(_ROOT, name, path))
    return found


def _pid_namespace() -> Optional[int]:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def cgroup_name(token: str) -> str:
    """The name of a job cgroup this process owns: ``malaunch-<token>-<start>-<pidns>`` (the module docstring);
    plain ``malaunch-<token>`` when this process's start time or pid namespace cannot be read (never swept)."""
    me, namespace = proctree.read_info(os.getpid()), _pid_namespace()
    if me is None or namespace is None:
        return f"malaunch-{token}"
    return f"malaunch-{token}-{me.start}-{namespace}"


def stray_owner(name: str) -> Optional[proctree.ProcKey]:
    """The owner recorded in the job cgroup name ``name`` when it is proven gone (see :func:`sweep_strays`);
    None when it may be alive or the name does not prove who owns it."""
    parts = name.split("-")
    if len(parts) != 5 or parts[0] != "malaunch" or not all(parts[i].isdigit() for i in (1, 3, 4)):
        return None
    owner = proctree.ProcKey(int(parts[1]), int(parts[3]))
    if int(parts[4]) != _pid_namespace():
        return None  # its pid means another process here
    info = proctree.read_info(owner.pid)
    if info is not None and info.start == owner.start and not info.zombie:
        return None  # alive
    return owner


def sweep_strays() -> List[str]:
    """Remove the empty job cgroups beside this process's own whose owner is proven gone (:func:`stray_owner`);
    returns the paths removed. Only ``rmdir``: a cgroup with a member stays."""
    removed = []
    for parent in _own_cgroup_dirs():
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            path = os.path.join(parent, name)
            if name.startswith("malaunch-") and stray_owner(name) is not None and _rmdir(path):
                removed.append(path)
    return removed


def _rmdir(path: str) -> bool:
    try:
        os.rmdir(path)
        return True
    except OSError:  # busy (a member, or one still exiting), or gone already: not this sweep's to count
        return False


def members(path: str) -> List[int]:
    """Pids in the cgroup at ``path`` now (empty when it cannot be read)."""
    return _members(path)


def _members(path: str) -> List[int]:
    try:
        with open(os.path.join(path, "cgroup.procs"), encoding="ascii") as handle:
            return [int(word) for word in handle.read().split()]
    except (OSError, ValueError):
        return []


def _in_cgroup(pid: int, relative: str) -> bool:
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as handle:
            return any(line.rstrip().endswith(relative) for line in handle)
    except OSError:
        return False


def remove(path: str, patience: float = 0.0, between: Optional[Callable[[], object]] = None) -> bool:
    """Remove the (empty) cgroup at ``path``; True once it is gone. A member that exited but is not reaped yet
    (a zombie: no longer in ``cgroup.procs``) keeps the cgroup busy until its parent reaps it: retried for
    ``patience`` seconds, calling ``between`` (e.g. reaping the caller's zombie children) before each retry;
    never while a member is left (that one survived SIGKILL)."""
    deadline = time.monotonic() + patience
    while True:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline or _members(path):
                return False
        time.sleep(0.01)
        if between is not None:
            between()


def kill_members(path: str, patience: float = 10.0) -> List[int]:
    """SIGKILL every member of the cgroup at ``path`` until none is left; remove it. Returns survivors.

    The caller must not be a member (``cgroup.kill`` would end it too): the shim leaves before it kills.
    """
    relative = "/" + os.path.basename(path)
    kill_file = os.path.join(path, "cgroup.kill")
    deadline = time.monotonic() + patience
    while True:
        members = _members(path)
        if not members:
            remove(path)
            return []
        if time.monotonic() > deadline:
            return members
        if os.path.exists(kill_file):
            with contextlib.suppress(OSError), open(kill_file, "w", encoding="ascii") as handle:
                handle.write("1")
        for pid in members:
            info = proctree.read_info(pid)
            if info is not None:
                proctree.signal_proven(
                    proctree.ProcKey(pid, info.start), signal.SIGKILL, lambda p: _in_cgroup(p, relative)
                )
        time.sleep(0.02)


class JobCgroup:
    """The job's cgroup (see the module docstring); :meth:`create` returns None where none can be made."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def create(cls, name: str) -> Optional[JobCgroup]:
        """Make ``<own cgroup>/<name>``; None when no hierarchy allows it."""
        for parent in _own_cgroup_dirs():
            path = os.path.join(parent, name)
            try:
                os.mkdir(path, 0o755)
            except OSError:
                continue
            if os.path.exists(os.path.join(path, "cgroup.procs")):
                return cls(path)
            with contextlib.suppress(OSError):
                os.rmdir(path)
        return None

    def add(self, pid: int) -> bool:
        """Move ``pid`` (a process the shim just started) in; False when the kernel refuses."""
        try:
            with open(os.path.join(self.path, "cgroup.procs"), "w", encoding="ascii") as handle:
                handle.write(str(pid))
            return True
        except OSError:
            return False

    def leave(self) -> bool:
        """Move this process back to the cgroup this one was made in (its own); False when the kernel refuses."""
        try:
            with open(os.path.join(os.path.dirname(self.path), "cgroup.procs"), "w", encoding="ascii") as handle:
                handle.write(str(os.getpid()))
            return True
        except OSError:
            return False

    def remove(self, patience: float = 0.0, between: Optional[Callable[[], object]] = None) -> bool:
        """Remove the cgroup when it is empty; True once it is gone (see :func:`remove`)."""
        return remove(self.path, patience, between)

    def members(self) -> List[int]:
        """Pids in the cgroup now."""
        return _members(self.path)

    def kill(self) -> List[int]:
        """End every member and remove the cgroup; returns the pids that survived."""
        return kill_members(self.path)


class CgroupEntry:
    """A job cgroup made early, with this process moving itself in on a thread (see the module docstring).

    :class:`.guards.EarlyGuards` hands it to the run that starts the ranks (once); :meth:`abandon` undoes it when no
    run took it.
    """

    def __init__(self, cgroup: JobCgroup) -> None:
        self.cgroup = cgroup
        self._inside = False
        self._taken = False
        self._thread = threading.Thread(target=self._enter, name="malaunch-cgroup-entry", daemon=True)

    @classmethod
    def begin(cls, name: str) -> Optional[CgroupEntry]:
        """Make ``name`` below this process's cgroup and start moving in; None when no cgroup can be made."""
        cgroup = JobCgroup.create(name)
        if cgroup is None:
            return None
        entry = cls(cgroup)
        entry._thread.start()
        return entry

    def _enter(self) -> None:
        self._inside = self.cgroup.add(os.getpid())

    def wait(self) -> bool:
        """Block until the move is done; True when this process is inside."""
        self._thread.join()
        return self._inside

    def abandon(self) -> None:
        """The shim is done with the cgroup: where no run took it, or the run that took it failed before its
        start (its log folder or files could not be made), this process is still inside: it leaves and removes
        the cgroup. A run that started removed it already (then this only finds it gone)."""
        self._taken = True
        self.wait()
        if _in_cgroup(os.getpid(), "/" + os.path.basename(self.cgroup.path)):
            self.cgroup.leave()
        self.cgroup.remove()
