"""Inside a local job: what its hosts use, and commands run inside a host (why it waits: :mod:`.pending`,
re-exported here; its events: :mod:`.events`).

Everything is read from the job directory and ``/proc`` (through :mod:`malaunch.entrypoint.run.proctree`):

- :func:`local_usage`: each running host's process tree (its shim, proven the job's, and its descendants):
  CPU cores over a short sample, resident memory, process count.
- :func:`local_exec`: the command in the host's environment: its network namespace (when hosts have one), its
  working folder and its contract variables, carrying the job's token so that ``stop`` ends it too.
"""

from __future__ import annotations

import os
import time
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from malaunch.entrypoint.public import descendants, newest_attempt, read_usage, snapshot

from ...errors import ConfigError, JobNotRunning, JobStateUnknown
from ...status import HostState, JobState, JobStatus
from ..inside import ExecResult, HostUsage, UsageReport
from .hostnet import network_from_json
from .jobdir import JOB_ID_VARIABLE, JobPaths, is_job_process, read_json
from .pending import pending_reason

# Running a command in a host (``local_exec``) imports what it needs when it runs.

__all__ = ["local_exec", "local_usage", "pending_reason"]


# -- usage -----------------------------------------------------------------------------------------------
def _running(status: JobStatus, what: str) -> None:
    if status.state is not JobState.RUNNING:
        hint = (
            f"see 'ma-submit status {status.id}'"
            if status.state is JobState.PENDING
            else f"its record is in 'ma-submit events {status.id}'"
        )
        raise JobNotRunning(status.id, status.state.value, f"{what} needs a running job; {hint}")


def _trees(status: JobStatus) -> Dict[int, List[int]]:
    """Host index -> the pids of its process tree (its shim first), for hosts whose shim is proven the job's."""
    table = snapshot()
    trees: Dict[int, List[int]] = {}
    for host in status.hosts:
        if host.state is HostState.RUNNING and host.pid is not None and is_job_process(host.pid, status.id):
            below = [info.pid for info in descendants(host.pid, table) if not info.zombie]
            trees[host.index] = [host.pid, *below]
    return trees


def _sample(pids: Sequence[int]) -> Dict[int, Tuple[int, int]]:
    found = {}
    for pid in pids:
        usage = read_usage(pid)
        if usage is not None:
            found[pid] = usage
    return found


def local_usage(status: JobStatus, *, interval: float = 0.5) -> UsageReport:
    """CPU, memory and processes of each running host's tree, CPU measured over ``interval`` seconds."""
    _running(status, "top")
    trees = _trees(status)
    first = {index: _sample(pids) for index, pids in trees.items()}
    start = time.monotonic()
    time.sleep(interval)
    took = max(time.monotonic() - start, 1e-3)
    hz = os.sysconf("SC_CLK_TCK")
    rows = []
    for host in status.hosts:
        if host.index not in trees:
            rows.append(HostUsage(host.index, host.address, note=f"{host.state.value.lower()}: no processes"))
            continue
        second = _sample(trees[host.index])
        ticks = sum(used - first[host.index][pid][0] for pid, (used, _) in second.items() if pid in first[host.index])
        memory = sum(rss for _, rss in second.values())
        rows.append(
            HostUsage(host.index, host.address, cpu_cores=round(ticks / hz / took, 2), memory_bytes=memory,
                      processes=len(second))
        )  # fmt: skip
    return UsageReport(status.id, tuple(rows), source="/proc of each host's process tree",
                       ranks=tuple(newest_attempt(status.progress)))


# -- exec ------------------------------------------------------------------------------------------------
def local_exec(
    paths: JobPaths,
    status: JobStatus,
    command: Sequence[str],
    *,
    host: int,
    environ: Mapping[str, str],
    python: str,
    capture: bool,
    stdin: Optional[bytes],
    tty: bool = False,
) -> ExecResult:
    """Run ``command`` as a child inside host ``host`` (see the module docstring); waits for its end. With
    ``tty`` it gets a terminal of its own (:mod:`.terminal`); ``stdin`` None then forwards this one's input."""
    import subprocess

    from .plan import LocalRequest, host_environment, with_secret
    from .terminal import run_on_terminal

    _running(status, "exec")
    if not command:
        raise ConfigError("exec needs a command", list(command), "give it after '--': ma-submit exec ID -- hostname")
    hosts = {h.index: h for h in status.hosts}
    if host not in hosts:
        raise ConfigError(f"job {status.id} has no host {host}", host, f"use 0 to {len(hosts) - 1}")
    if hosts[host].state is not HostState.RUNNING:
        raise JobNotRunning(f"{status.id} host {host}", hosts[host].state.value, "pick a running host with --host")
    plan = read_json(paths.plan_file) or {}
    try:
        request = LocalRequest.from_json(plan["request"])
    except (KeyError, TypeError, ValueError) as exc:
        raise JobStateUnknown(status.id, f"plan.json cannot be read ({exc!r})") from None
    spec = request.hosts[host]
    env = with_secret(host_environment(environ, spec.env, python), None)  # exec is no shim: no job secret
    env[JOB_ID_VARIABLE] = status.id  # proven membership: stop and the runner's end find it by this token
    argv = list(network_from_json(dict(request.network)).wrap(host, list(command)))
    try:
        if tty:
            code, out = run_on_terminal(argv, env=env, cwd=spec.cwd, forward_input=stdin is None, capture=capture)
            return ExecResult(_code(code), out)
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=spec.cwd,
            stdin=subprocess.PIPE if capture else (None if stdin is None else subprocess.DEVNULL),
            stdout=subprocess.PIPE if capture else None,
            stderr=subprocess.PIPE if capture else None,
        )
    except OSError as exc:
        raise ConfigError(f"cannot run {command[0]!r} in host {host} ({exc.strerror})", command[0],
                          "check the command's name and that it exists on this machine") from None  # fmt: skip
    if capture:
        out, err = proc.communicate(stdin or b"")
        return ExecResult(_code(proc.returncode), out, err)
    return ExecResult(_code(proc.wait()))


def _code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode
