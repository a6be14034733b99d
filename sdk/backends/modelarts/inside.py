"""Inside a ModelArts training job: its events (paged), its tasks' metrics, why it waits, and its SSH endpoint.

- Events: ``GET /v2/{project_id}/training-jobs/{id}/events`` with ``offset``/``limit`` (at most 100 a page) and
  ``order=asc``, page after page until ``total`` (fields of ``ListTrainingJobEventsResponse``: ``events: [{message,
  level, time, source}]``).
- Metrics: ``GET .../metrics/{task}`` per task -> ``metrics: [{metric, value: [one average per minute]}]``; the
  newest value of each metric counts (``cpuUsage``, ``memUsage``: percent; ``gpuUtil``, ``npuUtil``, ... as the
  platform names them).
- Why pending: the secondary phase (``Queuing``, ...) and the newest event, warnings and errors first.
- No exec API: a job created with ``modelarts.ssh.key_pair_names`` gets ``endpoints.ssh.task_urls`` (one SSH
  URL per task); :func:`ssh_command` turns the host's URL into a ready-to-run ``ssh`` argv.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...errors import BackendError, ConfigError, JobNotRunning
from ...failures import TAIL_LINES
from ...status import JobState
from ..events import JobEvent
from ..inside import HostUsage
from .api import ModelArtsClient
from .phases import failing_task, status_from_job, task_index

__all__ = [
    "failure_tail",
    "event_of",
    "job_events",
    "latest_events",
    "pending_reason",
    "running_job",
    "ssh_command",
    "task_metrics",
    "task_names",
    "usage_row",
]

PAGE = 100
_URL = re.compile(r"\A(?:ssh://)?(?:(?P<user>[^@/]+)@)?(?P<host>\[[^\]]+\]|[^:/]+)(?::(?P<port>\d+))?/?\Z")
_PERCENT = ("cpuUsage", "memUsage")
ENABLE_SSH = "add 'ssh: {key_pair_names: [YOUR_KEY_PAIR]}' under 'modelarts:' in the job file and submit it again"


def _when(value: object) -> Optional[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) / (1000.0 if value > 1e11 else 1.0)
    if not isinstance(value, str) or not value:
        return None
    if value.isdigit():
        return _when(int(value))
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)).timestamp()


def event_of(item: Mapping[str, Any], fallback: float) -> JobEvent:
    """A training-job event as a :class:`JobEvent` (``fallback`` when it carries no readable time)."""
    source = str(item.get("source") or "job")
    match = re.search(r"(?:worker|task)-(\d+)", source)
    level = str(item.get("level") or "Info").capitalize()
    message = str(item.get("message") or "").strip()
    reason = message.split(":", 1)[0][:40] if ":" in message[:40] else level
    return JobEvent(_when(item.get("time")) or fallback, source, reason, message, level,
                    int(match.group(1)) if match else None)  # fmt: skip


def job_events(client: ModelArtsClient, job_id: str, *, page: int = PAGE) -> List[JobEvent]:
    """Every event of the job, oldest first, page after page (see the module docstring)."""
    path = f"{client.jobs_path}/{job_id}/events"
    out: List[JobEvent] = []
    offset = 0
    while True:
        query = (("offset", str(offset)), ("limit", str(page)), ("order", "asc"))
        data = client.call("GET", path, query=query, job_id=job_id)
        items = [item for item in (data.get("events") or []) if isinstance(item, Mapping)]
        out.extend(event_of(item, 0.0) for item in items)
        offset += len(items)
        total = data.get("total")
        if not items or not isinstance(total, int) or offset >= total:
            return sorted(out, key=lambda event: event.time)


def pending_reason(job: Mapping[str, Any], events: Sequence[JobEvent]) -> str:
    """Why a pending job waits: its secondary phase and its newest event (warnings and errors first)."""
    status = job.get("status") or {}
    phase, secondary = str(status.get("phase") or ""), str(status.get("secondary_phase") or "")
    parts = [f"the platform reports {phase}/{secondary}" if secondary and secondary != phase else
             f"the platform reports {phase or 'no phase yet'}"]  # fmt: skip
    worst = [event for event in events if event.level in ("Warning", "Error")]
    latest = (worst or list(events))[-1:] if events else []
    parts.extend(f"{event.level.lower()} event: {event.message}" for event in latest)
    return "; ".join(parts)


def task_metrics(client: ModelArtsClient, job_id: str, task: str) -> Dict[str, float]:
    """The newest value of each metric of one task."""
    data = client.call("GET", f"{client.jobs_path}/{job_id}/metrics/{task}", job_id=job_id)
    out: Dict[str, float] = {}
    for item in data.get("metrics") or []:
        if not isinstance(item, Mapping):
            continue
        values = [v for v in item.get("value") or [] if isinstance(v, (int, float)) and not isinstance(v, bool)]
        values = [v for v in values if v >= 0]  # the platform fills minutes it has no sample for with -1
        if values and item.get("metric"):
            out[str(item["metric"])] = float(values[-1])
    return out


def usage_row(task: str, position: int, figures: Mapping[str, float]) -> HostUsage:
    """One host's usage from its task's newest metric values."""
    accelerators = {name: value for name, value in figures.items() if name not in _PERCENT}
    return HostUsage(task_index(task, position), task, cpu_percent=figures.get("cpuUsage"),
                     memory_percent=figures.get("memUsage"), accelerators=accelerators,
                     note="" if figures else "no samples yet (the platform averages per minute)")  # fmt: skip


def ssh_command(job: Mapping[str, Any], job_id: str, host: int, command: Sequence[str]) -> Tuple[List[str], str]:
    """The ssh argv that opens host ``host`` of the job, and a note naming the key pair it takes.

    Raises:
        ConfigError: the job was created without an SSH endpoint (the message says how to enable it), or it
            has no host ``host``.
        BackendError: the endpoint is asked for but the platform has not published its address yet.
    """
    ssh = ((job.get("endpoints") or {}).get("ssh")) or {}
    keys = [str(k) for k in ssh.get("key_pair_names") or []]
    if not keys:
        raise ConfigError(f"job {job_id} has no SSH endpoint (ModelArts has no exec API)", job_id, ENABLE_SSH)
    urls = {str(item.get("task")): str(item.get("url")) for item in ssh.get("task_urls") or [] if
            isinstance(item, Mapping)}  # fmt: skip
    by_host = {task_index(task, position): (task, url) for position, (task, url) in enumerate(sorted(urls.items()))}
    if not by_host:
        raise BackendError(f"job {job_id}: the platform has not published its SSH addresses yet; try again in a "
                           "minute ('ma-submit status' shows when it runs)")  # fmt: skip
    if host not in by_host:
        raise ConfigError(f"job {job_id} has no host {host}", host, f"use one of {sorted(by_host)}")
    task, url = by_host[host]
    match = _URL.match(url)
    if match is None:
        raise BackendError(f"job {job_id}: task {task}'s SSH address {url!r} is not host:port; connect by hand")
    argv = ["ssh"]
    if match.group("port"):
        argv += ["-p", match.group("port")]
    if command:
        argv.append("-t")
    argv.append(f"{match.group('user') or 'ma-user'}@{match.group('host')}")
    argv += list(command)
    note = (f"ModelArts has no exec API; host {host} (task {task}) takes SSH with key pair {', '.join(keys)} "
            "(add '-i YOUR_KEY.pem' if it is not in your ssh agent)")  # fmt: skip
    return argv, note


def latest_events(api: ModelArtsClient, platform_id: str, page: int) -> List[JobEvent]:
    """The job's last five events (none when they cannot be read: the phase alone still says why it waits)."""
    try:
        return job_events(api, platform_id, page=page)[-5:]
    except BackendError:
        return []


def running_job(job: Dict[str, Any], job_id: str, what: str) -> Dict[str, Any]:
    """``job`` (the platform's record of ``job_id``) when it runs; else ``what`` (``top``, ``exec``) is refused."""
    status = status_from_job(job)
    if status.state is not JobState.RUNNING:
        hint = f"see 'ma-submit events {job_id}'"
        raise JobNotRunning(job_id, f"{status.state.value} ({status.raw_state})", f"{what} needs a running job; "
                            f"{hint}")  # fmt: skip
    return job


def task_names(job: Mapping[str, Any]) -> List[str]:
    """The job's task names (``worker-<i>`` by its node count while the platform lists none)."""
    tasks = [str(task) for task in (job.get("status") or {}).get("tasks") or []]
    if tasks:
        return tasks
    count = ((job.get("spec") or {}).get("resource") or {}).get("node_count")
    return [f"worker-{i}" for i in range(count if isinstance(count, int) and count > 0 else 1)]


def failure_tail(api: ModelArtsClient, tails: Dict[str, Tuple[str, ...]], job_id: str,
                 job: Mapping[str, Any]) -> Tuple[str, ...]:  # fmt: skip
    """The failing task's last log lines, read once per job and kept in ``tails`` (none when the log cannot be
    read: the class is then decided from the exit code alone)."""
    if job_id not in tails:
        task = failing_task(job)
        lines: Tuple[str, ...] = ()
        if task is not None:
            try:
                content, _size = api.task_log(job_id, task)
            except BackendError:
                content = b""
            lines = tuple(content.decode("utf-8", errors="replace").splitlines()[-TAIL_LINES:])
        tails[job_id] = lines
    return tails[job_id]
