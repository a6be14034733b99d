"""Group restarts across hosts: every host's shim says which attempt it runs; a peer's restart ends the others'.

Each host's shim restarts its own group (:mod:`.attempts`). A rank on another host that is not inside a
collective when its peer dies notices only at its next collective, or at its timeout (gloo/HCCL: 30 min by
default), and the hosts' attempt counters drift apart. So the attempts are kept in step:

- With ``MA_MAX_RESTARTS`` > 0 the shim writes ``<log dir>/attempt.json`` atomically at every change
  (:func:`announce_attempt`): ``{"attempt": K, "state": "running" | "backoff" | "ended", "pid": <shim pid>}``;
  ``backoff`` means attempt K failed and K+1 will start after the back-off.
- Whoever runs the hosts (the SDK's local runner; see ``docs/recovery.md`` for the platforms) watches these
  files (:func:`frontier`). When a host runs, or is about to run, a later attempt than another host that is
  still ``running``, it sends that host's shim :data:`PEER_RESTART_SIGNAL` (SIGUSR1), once per attempt.
- A shim that gets SIGUSR1 during an attempt ends it like a failure (the grace period, then SIGKILL) with the
  root cause :func:`peer_restart_failure`: exit code 3 and the line ``a peer host restarted the job``, class
  ``rendezvous_timeout`` (retryable), so its restart loop starts the next attempt after its back-off and the
  hosts meet again. Outside an attempt (back-off, before, after) the shim ignores SIGUSR1.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any, Dict, Optional

from ..contract.errors import EXIT_LAUNCH
from ..report.report import Failure, write_report

__all__ = [
    "ATTEMPT_FILE",
    "PEER_RESTART_LINE",
    "PEER_RESTART_SIGNAL",
    "announce_attempt",
    "attempt_file",
    "frontier",
    "ignore_peer_restarts",
    "peer_restart_failure",
    "read_attempt",
]

ATTEMPT_FILE = "attempt.json"
PEER_RESTART_SIGNAL = signal.SIGUSR1
#: The root-cause line of an attempt a peer's restart ended (``failure_class`` matches it: retryable).
PEER_RESTART_LINE = "ma-entrypoint: a peer host restarted the job: this host's attempt ends so that they meet again"
_STATES = ("running", "backoff", "ended")


def attempt_file(log_dir: str) -> str:
    """Where a shim with log directory ``log_dir`` announces its attempt."""
    return os.path.join(log_dir, ATTEMPT_FILE)


def announce_attempt(log_dir: str, attempt: int, state: str) -> None:
    """Write ``<log dir>/attempt.json`` atomically (best effort: a failed write only slows peers down)."""
    if state not in _STATES:
        raise ValueError(f"unknown attempt state {state!r}")
    write_report(attempt_file(log_dir), {"attempt": attempt, "state": state, "pid": os.getpid()})


def read_attempt(path: str) -> Optional[Dict[str, Any]]:
    """A host's announcement, read defensively: None unless it is whole and well-formed."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.loads(handle.read(4096))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    attempt, state, pid = data.get("attempt"), data.get("state"), data.get("pid")
    if not (isinstance(attempt, int) and isinstance(pid, int) and state in _STATES):
        return None
    return {"attempt": attempt, "state": state, "pid": pid}


def frontier(announcement: Optional[Dict[str, Any]]) -> Optional[int]:
    """The attempt a host runs or is about to run (``backoff`` after K: K+1); None when it runs none."""
    if announcement is None or announcement["state"] == "ended":
        return None
    attempt = int(announcement["attempt"])
    return attempt + 1 if announcement["state"] == "backoff" else attempt


def ignore_peer_restarts() -> None:
    """Ignore :data:`PEER_RESTART_SIGNAL` in this process (outside an attempt); main thread only."""
    signal.signal(PEER_RESTART_SIGNAL, signal.SIG_IGN)


def peer_restart_failure(host: str, log_file: str) -> Failure:
    """The root cause of an attempt that a peer host's restart ended."""
    return Failure(
        name="peer-restart",
        rank=None,
        local_rank=None,
        host=host,
        pid=None,
        exit_code=EXIT_LAUNCH,
        signal=None,
        log_file=log_file,
        tail=(PEER_RESTART_LINE,),
        source="peer",
    )
