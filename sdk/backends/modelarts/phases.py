"""ModelArts job phases -> :class:`~malaunch.sdk.status.JobState`, and a job's details -> :class:`JobStatus`.

``status.phase`` is the documented level: Creating, Pending -> PENDING; Running, Terminating -> RUNNING;
Completed -> SUCCEEDED; Failed, Abnormal -> FAILED; Terminated -> STOPPED. ``status.secondary_phase`` refines
it where it matters (CreateFailed is a failure even while the phase says otherwise). Anything else is
UNKNOWN, with the platform's words kept in ``raw_state``. A failed job's exit code is its failing task's own
exit code from ``status.task_statuses`` (1 when the platform gives none); tasks that only ended by SIGTERM or
SIGKILL (143, 137) because another task failed count last. A failed job's class
(:mod:`malaunch.sdk.failures`) comes from that exit code and the failing task's log tail, when given.
"""

from __future__ import annotations

import re
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from ...failures import failure_from_log
from ...status import HostState, HostStatus, JobState, JobStatus

__all__ = [
    "PHASES", "SECONDARY_PHASES", "failing_task", "job_state", "platform_restarts", "status_from_job", "task_index",
]  # fmt: skip

PHASES: Mapping[str, JobState] = {
    "Creating": JobState.PENDING,
    "Pending": JobState.PENDING,
    "Running": JobState.RUNNING,
    "Terminating": JobState.RUNNING,
    "Completed": JobState.SUCCEEDED,
    "Failed": JobState.FAILED,
    "Abnormal": JobState.FAILED,
    "Terminated": JobState.STOPPED,
}
#: Secondary phases that override the phase.
SECONDARY_PHASES: Mapping[str, JobState] = {
    "CreateFailed": JobState.FAILED,
    "TerminatedFailed": JobState.FAILED,
    "Lost": JobState.FAILED,
}
_TASK = re.compile(r".*-(\d+)\Z")
#: Exit codes of tasks that were ended by a signal (SIGTERM, SIGKILL) rather than failing on their own.
_TERMINATED_CODES = (143, 137)


def job_state(phase: str, secondary: str = "") -> JobState:
    """The state for a phase pair; UNKNOWN for words nobody mapped."""
    if secondary in SECONDARY_PHASES:
        return SECONDARY_PHASES[secondary]
    return PHASES.get(phase, JobState.UNKNOWN)


def task_index(task: str, fallback: int) -> int:
    """The host index of a task name such as ``worker-1``."""
    match = _TASK.match(task)
    return int(match.group(1)) if match else fallback


def _ms(value: object) -> Optional[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value) / 1000.0
    return None


def _task_codes(status: Mapping[str, Any]) -> List[Tuple[str, int, str]]:
    codes = []
    for item in status.get("task_statuses") or []:
        if isinstance(item, Mapping) and isinstance(item.get("exit_code"), int):
            codes.append((str(item.get("task", "")), int(item["exit_code"]), str(item.get("message") or "")))
    return codes


def _hosts(status: Mapping[str, Any], state: JobState) -> Tuple[HostStatus, ...]:
    codes = {task: code for task, code, _ in _task_codes(status)}
    hosts = []
    for position, task in enumerate(status.get("tasks") or []):
        name = str(task)
        code = codes.get(name)
        if code is not None or state.is_terminal:
            host_state = HostState.EXITED
        elif state is JobState.RUNNING:
            host_state = HostState.RUNNING
        else:
            host_state = HostState.PENDING
        hosts.append(HostStatus(index=task_index(name, position), address=name, state=host_state, exit_code=code))
    return tuple(sorted(hosts, key=lambda host: host.index))


def _failing(status: Mapping[str, Any]) -> List[Tuple[str, int, str]]:
    return sorted(
        ((task, code, text) for task, code, text in _task_codes(status) if code != 0),
        key=lambda item: item[1] in _TERMINATED_CODES,  # tasks the platform ended after the failing one: last
    )


def failing_task(job: Mapping[str, Any]) -> Optional[str]:
    """The task whose exit code is the failed job's (the root cause), or ``None``."""
    failing = _failing(job.get("status") or {})
    return failing[0][0] if failing and failing[0][0] else None


def status_from_job(job: Mapping[str, Any], location: str = "", log_tail: Sequence[str] = ()) -> JobStatus:
    """A :class:`JobStatus` from a job's details (``GET /training-jobs/{id}``); pure.

    Its ``id`` is the job's name (malaunch's id of the job, see :mod:`.backend`); the platform's id when the
    job has no name.

    ``log_tail``: the last lines of :func:`failing_task`'s log, for a failed job's ``failure_class``.
    """
    metadata = job.get("metadata") or {}
    status = job.get("status") or {}
    phase = str(status.get("phase") or "")
    secondary = str(status.get("secondary_phase") or "")
    state = job_state(phase, secondary)
    exit_code: Optional[int] = None
    message = ""
    failing = _failing(status)
    if state is JobState.SUCCEEDED:
        exit_code = 0
    elif state is JobState.FAILED:
        exit_code = failing[0][1] if failing else 1
        message = (
            f"task {failing[0][0]} exited with code {failing[0][1]}" + (f": {failing[0][2]}" if failing[0][2] else "")
            if failing
            else f"the platform reports {phase}/{secondary} without a task exit code"
        )
    elif state is JobState.STOPPED:
        exit_code = 143
        message = "terminated"
    started = _ms(status.get("start_time"))
    duration = _ms(status.get("duration"))
    ended = started + duration if started is not None and duration is not None and state.is_terminal else None
    return JobStatus(
        id=str(metadata.get("name") or metadata.get("id", "")),
        backend="modelarts",
        state=state,
        exit_code=exit_code,
        message=message,
        raw_state=f"{phase}/{secondary}" if secondary else phase,
        name=str(metadata.get("name", "")),
        created_at=_ms(metadata.get("create_time")),
        started_at=started,
        ended_at=ended,
        hosts=_hosts(status, state),
        location=location,
        failure_class=failure_from_log(exit_code, log_tail) if state is JobState.FAILED and exit_code else None,
        platform_restarts=platform_restarts(status),
    )


def platform_restarts(status: Mapping[str, Any]) -> Optional[int]:
    """How many times the platform started the job again: its ``running_records`` after the first (one per
    run: a restart or a rescheduling), or ``None`` when the details carry no records to count."""
    records = status.get("running_records")
    if not isinstance(records, list) or not records:
        return None
    return len(records) - 1
