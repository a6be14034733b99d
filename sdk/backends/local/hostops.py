"""What a platform does to one host of a running local job: lose it for good, or bring it back.

A cluster loses a machine (and with it the pod of one host) and later gets one back; an elastic torchrun job
(``launcher.min_hosts``) goes on without the lost host and takes it in again. The local backend plays that
platform, so a job can be tried against it on this machine (``LocalBackend.lose_host`` / ``restore_host``):

1. The caller writes a request, ``<job dir>/requests/host-<index>.json`` (``{"action": "lose" | "restore"}``),
   atomically (:func:`write_request`), and waits until the runner has taken it (the file is gone).
2. The job runner, the one process that starts and reaps the hosts, reads and removes every request on each
   tick (:func:`take_requests`; a damaged or unknown request is removed and said in ``runner.log``, never
   acted on). ``lose``: the host's shim and every process under it are killed with SIGKILL (each proven the
   job's: :func:`host_tree` lists them before the first signal, since the ranks are re-parented once their
   shim is gone), and the host is not started again; the job is not ended by it: the other hosts' shims
   decide (an elastic job goes on while ``min_hosts`` remain, any other job waits ``host_wait`` for the host
   and then exits 75). ``restore``: a lost host's shim is started again, as a platform starts a pod on a new
   machine; it joins the job's coordinator.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from malaunch.entrypoint.public import descendants

from ...errors import BackendError, ConfigError, JobNotRunning
from ...home import write_json_atomic
from ...status import HostState, JobState, JobStatus
from .jobdir import JobPaths, read_json, signal_job_process

__all__ = [
    "HOST_ACTIONS",
    "ask_runner",
    "host_tree",
    "kill_host_tree",
    "request_file",
    "requests_dir",
    "take_requests",
    "write_request",
]

#: What can be asked of a host: lose it for good, or bring a lost one back.
HOST_ACTIONS = ("lose", "restore")
_PREFIX, _SUFFIX = "host-", ".json"
#: How long the caller waits for the runner (which looks every ~50 ms) to take a request.
TAKE_TIMEOUT = 10.0


def requests_dir(paths: JobPaths) -> str:
    """The folder the runner reads requests from."""
    return os.path.join(paths.job_dir, "requests")


def request_file(paths: JobPaths, index: int) -> str:
    """Where a request about host ``index`` is written (one pending request per host; a newer one replaces it)."""
    return os.path.join(requests_dir(paths), f"{_PREFIX}{index}{_SUFFIX}")


def write_request(paths: JobPaths, index: int, action: str) -> str:
    """Write the request ``action`` about host ``index`` atomically; returns its path. Raises ``OSError``."""
    if action not in HOST_ACTIONS:
        raise ValueError(f"unknown host action {action!r}")
    os.makedirs(requests_dir(paths), mode=0o700, exist_ok=True)
    path = request_file(paths, index)
    write_json_atomic(path, {"action": action, "host": index})
    return path


def take_requests(paths: JobPaths, hosts: int) -> Tuple[List[Tuple[int, str]], List[str]]:
    """Read and remove every pending request: ``[(host, action)]`` in host order, and one line per request
    that was removed without being acted on (damaged, unknown action, no such host)."""
    folder = requests_dir(paths)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return [], []
    taken: List[Tuple[int, str]] = []
    refused: List[str] = []
    for name in names:
        if not (name.startswith(_PREFIX) and name.endswith(_SUFFIX)):
            continue  # a temporary file being written
        path = os.path.join(folder, name)
        data = read_json(path)
        with contextlib.suppress(OSError):
            os.unlink(path)
        index = _host_of(data, hosts)
        action = data.get("action") if data is not None else None
        if index is None or action not in HOST_ACTIONS:
            expected = f"{{action: lose|restore, host: 0..{hosts - 1}}}"
            refused.append(f"request {name} ignored: expected {expected}, got {data!r}")
            continue
        taken.append((index, str(action)))
    return sorted(taken), refused


def _host_of(data: Optional[Dict[str, Any]], hosts: int) -> Optional[int]:
    """The request's host index when it is one of the job's ``hosts``."""
    index = data.get("host") if data is not None else None
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < hosts:
        return None
    return index


def host_tree(pid: int) -> List[int]:
    """The host's shim ``pid`` and every process under it, listed before any of them is signalled."""
    return [pid, *(info.pid for info in descendants(pid) if not info.zombie)]


def kill_host_tree(pid: int, job_id: str) -> int:
    """SIGKILL the shim ``pid`` and everything under it, each only when proven the job's; how many were hit."""
    return sum(1 for member in host_tree(pid) if signal_job_process(member, job_id, signal.SIGKILL))


def ask_runner(
    paths: JobPaths, status: JobStatus, index: int, action: str, done: Callable[[], bool],
    timeout: float = TAKE_TIMEOUT,
) -> None:  # fmt: skip
    """Hand the request ``action`` about host ``index`` of the running job to its runner; return once it is
    taken and ``done()`` says it was done (the host reaped as lost; started again).

    Raises:
        JobNotRunning: the job is not running (nothing to lose, nothing to take back in).
        ConfigError: no host ``index`` in the job.
        BackendError: the request could not be written, or the runner did not take it within ``timeout``.
    """
    if status.state is not JobState.RUNNING:
        raise JobNotRunning(status.id, status.state.value, f"a host can be lost or brought back only while the job "
                            f"runs; its record is in 'ma-submit events {status.id}'")  # fmt: skip
    count = len(status.hosts)
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        raise ConfigError(f"host: job {status.id} has hosts 0 to {count - 1}", index, "name one of them")
    running = status.hosts[index].state is HostState.RUNNING
    if action == "restore" and running:
        raise ConfigError(f"host {index} of job {status.id} runs: only a lost host is brought back", index,
                          "lose it first (lose_host), or leave it")  # fmt: skip
    if action == "lose" and status.hosts[index].state is HostState.EXITED:
        raise ConfigError(f"host {index} of job {status.id} has ended already", index, "nothing to lose")
    try:
        path = write_request(paths, index, action)
    except OSError as exc:
        raise BackendError(f"job {status.id}: cannot write the request to {action} host {index} in {paths.job_dir}: "
                           f"{exc.strerror or exc}; check the disk and the folder's permissions") from None  # fmt: skip
    deadline = time.monotonic() + timeout
    while os.path.exists(path) or not done():
        if time.monotonic() > deadline:
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise BackendError(f"job {status.id}: its runner did not {action} host {index} within {timeout:g} s "
                               f"(the job may have ended meanwhile); see {paths.runner_log}")  # fmt: skip
        time.sleep(0.02)
