"""Why a local job still waits, asked by every status (so it is light: no events, usage or exec here).

From the job directory and ``/proc``: the runner not started yet, a host not started yet, a host whose shim is
still preparing its launch (its last ``[ma-entrypoint] waiting for ...`` line: the rank table, the master's name),
or, once every host has launched, "waiting for a port": the master port that torchrun's store or msrun's
scheduler opens on host 0 is not listening yet (read from ``/proc/<host 0's shim>/net/tcp``, its network
namespace's sockets; nothing is connected to it). Before all of these: the job's hosts waiting for a lost one to
come back, with the time left (a host's ``attempt.json`` says ``waiting``: which host, why, until when). A host
whose prepare steps run (``launcher.prepare``; its ``prepare.json``) says which step, for how long.
"""

from __future__ import annotations

import os
import time
from typing import Optional

from malaunch.entrypoint.public import Name

from ...status import HostState, JobState, JobStatus
from .jobdir import JobPaths, read_json

__all__ = ["pending_reason"]

_SHIM = b"[ma-entrypoint] "
_ANNOUNCE = b"[ma-entrypoint] method="
_WAITING = b"[ma-entrypoint] waiting for "
_HEAD = 256 << 10  # the shim's start-up lines come first in a host's console
_FIRST = 16 << 10


def _console_head(path: str) -> bytes:
    """The start of a host's console: its first 16 KiB when the launch is announced there, else up to 256 KiB."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_FIRST)
            return head if _ANNOUNCE in head else head + handle.read(_HEAD - _FIRST)
    except OSError:
        return b""


def _preparing(console: str) -> Optional[str]:
    """What a host's shim still waits for before its launch, or None once it has announced its launch."""
    head = _console_head(console)
    if _ANNOUNCE in head:
        return None
    waiting = [line for line in head.splitlines() if line.startswith(_WAITING)]
    if waiting:
        return waiting[-1][len(_SHIM) :].decode("utf-8", "replace")
    return "preparing its launch (reading the environment)"


#: The port the master host's launcher opens, by run method: torchrun's store, msrun's scheduler.
_MASTER_PORTS = {"torchrun": ("MA_TORCHRUN_MASTER_PORT", "torchrun's store"),
                 "msrun": ("MA_MSRUN_MASTER_PORT", "msrun's scheduler")}  # fmt: skip
_LISTEN = "0A"  # a socket's state in /proc/net/tcp: listening


def _listening(pid: int, port: int) -> Optional[bool]:
    """Whether a socket listens on ``port`` in the network namespace of process ``pid``; None when unreadable."""
    seen = False
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}", encoding="ascii", errors="replace") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        seen = True
        for row in rows:
            fields = row.split()
            if len(fields) > 3 and fields[3] == _LISTEN and fields[1].rsplit(":", 1)[-1] == f"{port:04X}":
                return True
    return False if seen else None


def _port_waited(status: JobStatus, paths: JobPaths) -> Optional[str]:
    """Why the hosts wait for the master's port (torchrun's store, msrun's scheduler) not yet open, or None."""
    master = next((h for h in status.hosts if h.index == 0), None)
    if master is None or master.state is not HostState.RUNNING or master.pid is None:
        return None
    from .plan import LocalRequest

    try:
        request = LocalRequest.from_json((read_json(paths.plan_file) or {})["request"])
        env = request.hosts[0].env
        variable, what = _MASTER_PORTS[str(env.get(Name.MA_RUN_METHOD, "")).lower()]
        port = int(env[variable])
    except (KeyError, TypeError, ValueError, IndexError):
        return None  # no port to wait for (the fan-out), or a plan that cannot say
    if _listening(master.pid, port) is not False or _ranks_spoke(env.get(Name.MALAUNCH_LOG_DIR)):
        return None  # open, or closed again after the ranks ran (their launcher ends its store before it exits)
    return f"waiting for a port: {what} on host 0 ({master.address}) port {port} is not open yet"


#: How a rank's log is named: the shim's copy (``rank-N.log``), msrun's own (``msrun/worker_N.log``).
_RANK_LOGS = ("rank-", "worker_")


def _ranks_spoke(log_dir: Optional[str]) -> bool:
    """Some rank of the master host has written output (its launcher met the others long ago)."""
    if not log_dir:
        return False
    for folder, _, names in os.walk(log_dir):
        for name in names:
            if name.startswith(_RANK_LOGS) and name.endswith(".log"):
                try:
                    if os.stat(os.path.join(folder, name)).st_size > 0:
                        return True
                except OSError:
                    continue
    return False


def _host_waited(status: JobStatus, paths: JobPaths, now: float) -> Optional[str]:
    """The job's hosts wait for a lost one to come back: which, why, and the time left; None when they do not."""
    if len(status.hosts) < 2:
        return None
    from malaunch.entrypoint.public import attempt_file, read_attempt  # a running multi-host job only: list is light

    running = {h.index for h in status.hosts if h.state is HostState.RUNNING}
    try:
        hosts = (read_json(paths.plan_file) or {})["request"]["hosts"]
        log_dirs = {int(h["index"]): h["env"][Name.MALAUNCH_LOG_DIR] for h in hosts}
    except (KeyError, TypeError, ValueError):
        return None
    for index in sorted(running):
        log_dir = log_dirs.get(index)
        announced = read_attempt(attempt_file(log_dir)) if isinstance(log_dir, str) else None
        waiting = announced.get("waiting") if announced is not None and announced["state"] == "waiting" else None
        if waiting is None:
            continue
        left = waiting["until"] - now
        time_left = f"{left:.0f} s left" if left >= 0.5 else "its time is up: the job's coordinator decides now"
        return (f"the job's hosts wait for host {waiting['host']} ({waiting['addr']}) to come back ({waiting['why']}): "
                f"{time_left}")  # fmt: skip
    return None


def _prepare_steps(paths: Optional[JobPaths], index: int) -> Optional[str]:
    """The prepare step host ``index`` runs, and for how long (its ``prepare.json``); None when none runs."""
    if paths is None:
        return None
    try:
        hosts = (read_json(paths.plan_file) or {})["request"]["hosts"]
        log_dir = {int(h["index"]): h["env"][Name.MALAUNCH_LOG_DIR] for h in hosts}.get(index)
    except (KeyError, TypeError, ValueError):
        return None
    if not isinstance(log_dir, str):
        return None
    from malaunch.entrypoint.public import prepare_line  # a running job's host only: status stays light

    return prepare_line(log_dir, time.time())


def pending_reason(status: JobStatus, paths: Optional[JobPaths] = None) -> str:
    """Why the job or one of its hosts still waits (see the module docstring); "" when nothing waits. With the
    job's ``paths``, also a master port (torchrun's store, msrun's scheduler) that is not open yet."""
    if status.is_terminal or status.state is JobState.UNKNOWN:
        return ""
    if status.state is JobState.PENDING:
        return "the job runner has not started the hosts yet"
    waited = _host_waited(status, paths, time.time()) if paths is not None else None
    reasons = [waited] if waited else []
    for host in status.hosts:
        if host.state is HostState.PENDING:
            reasons.append(f"host {host.index} ({host.address}) has not started yet")
        elif host.state is HostState.RUNNING and host.log_file:
            what = _preparing(host.log_file) or _prepare_steps(paths, host.index)
            if what is not None:
                reasons.append(f"host {host.index} ({host.address}) is {what}")
    if not reasons and paths is not None:  # every host has launched: the launchers meet at the master's port
        port = _port_waited(status, paths)
        if port is not None:
            reasons.append(port)
    return "; ".join(reasons)
