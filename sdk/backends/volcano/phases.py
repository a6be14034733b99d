"""Pure reading of what the cluster reports: Volcano Job phase -> :class:`JobState`, pods -> hosts and exit code.

Volcano's phases (``status.state.phase``) and what they become:

============  ==========  ===========================================================================
phase         JobState    why
============  ==========  ===========================================================================
(none yet)    PENDING     the controller has not looked at the new job
Pending       PENDING     waiting for the whole gang to be scheduled
Running       RUNNING
Restarting    RUNNING     a policy restarts the job (``maxRetry`` not used up yet)
Completing    RUNNING     pods are being cleaned up after success
Aborting      RUNNING     being aborted; not ended until ``Aborted``
Terminating   RUNNING     being terminated; not ended until ``Terminated``
Completed     SUCCEEDED
Failed        FAILED      ``maxRetry`` used up
Aborted       STOPPED     aborted (FAILED when a pod failed with a code other than 143, SIGTERM)
Terminated    STOPPED     terminated (FAILED likewise)
other         UNKNOWN     a phase nobody mapped; the word is kept in ``JobStatus.raw_state``
============  ==========  ===========================================================================

The job's exit code is the root cause's: of the worker containers that ended with a non-zero code, the one
that ended first (the shim there exits with its failing rank's own code; the other hosts were torn down
later, usually with 143 for SIGTERM). The API's times have whole seconds, so within the same second a code
other than 143 (SIGTERM) or 137 (SIGKILL) wins, then the lower host index.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...status import HostState, HostStatus, JobState
from .manifest import TASK_NAME

__all__ = ["PHASES", "container_stuck", "ended_why", "host_index", "host_statuses", "job_state", "parse_time",
           "retry_count", "root_cause"]  # fmt: skip

#: Volcano Job phase -> JobState (see the module docstring).
PHASES: Mapping[str, JobState] = {
    "": JobState.PENDING,
    "Pending": JobState.PENDING,
    "Running": JobState.RUNNING,
    "Restarting": JobState.RUNNING,
    "Completing": JobState.RUNNING,
    "Aborting": JobState.RUNNING,
    "Terminating": JobState.RUNNING,
    "Completed": JobState.SUCCEEDED,
    "Failed": JobState.FAILED,
    "Aborted": JobState.STOPPED,
    "Terminated": JobState.STOPPED,
}
_TASK_INDEX_ANNOTATION = "volcano.sh/task-index"
_NAME_INDEX = re.compile(r"-(\d+)\Z")
_SIGTERM_CODE = 143
#: A worker container's waiting reasons on its way to start (any other means it is stuck: ErrImagePull, ...).
_STARTING = ("ContainerCreating", "PodInitializing")
_TEARDOWN_CODES = (_SIGTERM_CODE, 137)  # SIGTERM, SIGKILL: how the other hosts end when the job is torn down


def job_state(phase: str, exit_code: Optional[int]) -> JobState:
    """The JobState for a Volcano ``phase``; Aborted/Terminated after a pod failed (``exit_code``) is FAILED."""
    state = PHASES.get(phase, JobState.UNKNOWN)
    if state is JobState.STOPPED and exit_code is not None and exit_code not in (0, _SIGTERM_CODE):
        return JobState.FAILED  # a policy aborted it after a pod failed (143 alone is how any stop ends pods)
    return state


def retry_count(job: Mapping[str, Any]) -> Optional[int]:
    """How many times Volcano restarted the whole job (``status.retryCount``, counted by its RestartJob policy);
    0 when the job has a status without it (Volcano leaves zero out), ``None`` before it has a status."""
    status = job.get("status")
    if not isinstance(status, Mapping):
        return None
    count = status.get("retryCount", 0)
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None


def parse_time(value: object) -> Optional[float]:
    """An RFC 3339 time from the API (``2026-11-22T20:41:36Z``) as seconds since the epoch; else ``None``."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def host_index(pod: Mapping[str, Any]) -> Optional[int]:
    """The pod's index in the task: Volcano's ``volcano.sh/task-index`` annotation, else its name's suffix."""
    meta = pod.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(_TASK_INDEX_ANNOTATION)
    if isinstance(raw, str) and raw.isdigit():
        return int(raw)
    match = _NAME_INDEX.search(str(meta.get("name", "")))
    return int(match.group(1)) if match else None


def _worker_state(pod: Mapping[str, Any]) -> Dict[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for status in statuses:
        if status.get("name") == TASK_NAME:
            state: Dict[str, Any] = status.get("state") or {}
            return state
    return {}


def container_stuck(pod: Mapping[str, Any]) -> str:
    """``reason: message`` of a worker container that waits for a reason other than being made (an image that cannot
    be pulled, a configuration that cannot be made, a crash loop), as the kubelet says it; else empty."""
    waiting = _worker_state(pod).get("waiting")
    if not isinstance(waiting, dict) or waiting.get("reason") in (None, "", *_STARTING):
        return ""
    message = " ".join(str(waiting.get("message") or "").split())
    message = message if len(message) <= 300 else message[:297] + "..."
    return f"{waiting['reason']}: {message}" if message else str(waiting["reason"])


def ended_why(pods: Sequence[Mapping[str, Any]], name: str) -> str:
    """What the kubelet says of why the worker container of pod ``name`` ended, when it is more than its exit code:
    ``OOMKilled`` in words; else empty."""
    for pod in pods:
        ended = _terminated(pod) if (pod.get("metadata") or {}).get("name") == name else None
        if ended is not None and ended.get("reason") == "OOMKilled":
            return "killed for its memory (OOMKilled: it went over its memory limit); give it more memory or use less"
    return ""


def _terminated(pod: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    terminated = _worker_state(pod).get("terminated")
    return terminated if isinstance(terminated, dict) else None


def root_cause(pods: Sequence[Mapping[str, Any]]) -> Tuple[Optional[int], str]:
    """``(exit code, pod name)`` of the worker container that failed first; ``(None, "")`` when none failed."""
    failures: List[Tuple[float, bool, int, int, str]] = []
    for pod in pods:
        ended = _terminated(pod)
        code = ended.get("exitCode") if ended else None
        if ended is None or not isinstance(code, int) or code == 0:
            continue
        when = parse_time(ended.get("finishedAt"))
        index = host_index(pod)
        name = str((pod.get("metadata") or {}).get("name", ""))
        failures.append(
            (
                when if when is not None else float("inf"),
                code in _TEARDOWN_CODES and ended.get("reason") != "OOMKilled",  # the kernel's kill is its own death
                index if index is not None else 1 << 30,
                code,
                name,
            )
        )
    if not failures:
        return None, ""
    *_order, code, name = min(failures)
    return code, name


def _host(pod: Mapping[str, Any], index: int, namespace: str) -> HostStatus:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    state = _worker_state(pod)
    name = str(meta.get("name", ""))
    running, ended = state.get("running"), state.get("terminated")
    started = parse_time((running or ended or {}).get("startedAt"))
    if isinstance(ended, dict):
        code = ended.get("exitCode")
        detail = str(ended.get("reason") or "")
        host_state, exit_code = HostState.EXITED, code if isinstance(code, int) else None
        finished = parse_time(ended.get("finishedAt"))
    else:
        host_state = HostState.RUNNING if running else HostState.PENDING
        exit_code, finished, detail = None, None, str(status.get("phase") or "")
        stuck = container_stuck(pod)
        if stuck:
            detail = stuck
    return HostStatus(
        index=index,
        address=str(status.get("podIP") or name),
        state=host_state,
        exit_code=exit_code,
        started_at=started,
        ended_at=finished,
        log_file=f"kubectl logs -n {namespace} {name}",
        detail=detail,
    )


def host_statuses(pods: Sequence[Mapping[str, Any]], namespace: str) -> Tuple[HostStatus, ...]:
    """One :class:`HostStatus` per worker pod, by index (pods without an index are left out)."""
    hosts: Dict[int, HostStatus] = {}
    for pod in pods:
        index = host_index(pod)
        if index is not None:
            hosts[index] = _host(pod, index, namespace)
    return tuple(hosts[i] for i in sorted(hosts))
