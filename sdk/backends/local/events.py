"""A local job's events (``ma-submit events``), from recorded facts only: ``state.json`` (submitted, runner
started, each host's start and exit with its code, a host lost for good and back), each host's ``attempt.json`` (a
restart in progress) and ``report.json`` (every restarted attempt, the shim's root-cause line, an elastic job's
changes of hosts: ``HostsChanged``), and the job's end. A host lost as the platform saw it (the runner's history)
and as the job's coordinator saw it (its events) is one fact: one ``HostLost`` that says both.

A module apart from :mod:`.inside` (what a job's hosts use, a command run inside one), which the events verb does
not load.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from malaunch.entrypoint.public import attempt_file, events_file, read_attempt, read_events

from ...errors import JobStateUnknown
from ...status import JobState
from ..events import JobEvent
from .jobdir import JobPaths, read_json
from .state import attempt_cause, is_lost, read_state, report_detail

__all__ = ["event_files", "local_events"]

_SIGTERM_CODE = 143


def _mtime(path: str) -> Optional[float]:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _report_events(index: int, path: str, started: float) -> List[JobEvent]:
    report = read_json(path)
    when = _mtime(path)
    if report is None or when is None:
        return []
    out: List[JobEvent] = []
    source = f"host {index}"
    at = started
    free = _membership_restarts(report)
    for attempt in report.get("attempts") or []:
        if not isinstance(attempt, Mapping):
            continue
        duration = attempt.get("duration")
        at += float(duration) if isinstance(duration, (int, float)) else 0.0
        if attempt.get("restarted") and attempt.get("attempt") in free:
            out.append(JobEvent(min(at, when), source, "Restarted", f"attempt {attempt.get('attempt')} ended for a "
                                "change of hosts (not charged to MA_MAX_RESTARTS); the shim started the next attempt",
                                "Normal", index))  # fmt: skip
        elif attempt.get("restarted") and isinstance(attempt.get("job_cause"), Mapping):  # the job's restart
            out.append(JobEvent(min(at, when), source, "Restarted", f"attempt {attempt.get('attempt')} of the job "
                                f"ended: root cause {attempt_cause(attempt)}; this host started the next attempt",
                                "Warning", index))  # fmt: skip
        elif attempt.get("restarted"):
            cause = attempt_cause(attempt)
            why = f"; root cause {cause}" if cause else ""
            out.append(JobEvent(min(at, when), source, "Restarted", f"attempt {attempt.get('attempt')} ended with "
                                f"exit code {attempt.get('exit_code')} ({attempt.get('failure_class')}){why}; "
                                "the shim started the next attempt", "Warning", index))  # fmt: skip
    if isinstance(report.get("root_cause"), Mapping):  # the shim's root-cause line
        out.append(JobEvent(when, source, "RootCause", report_detail(report), "Error", index))
    return out


def _membership_restarts(report: Mapping[str, Any]) -> Set[int]:
    """The attempts an elastic job ended only to change its hosts: each one before an uncharged change."""
    hosts = report.get("hosts")
    changes = hosts.get("membership") if isinstance(hosts, Mapping) else None
    if not isinstance(changes, list):
        return set()
    return {change["attempt"] - 1 for change in changes if isinstance(change, Mapping)
            and isinstance(change.get("attempt"), int) and change.get("charged") is False}  # fmt: skip


def _membership_events(host: Mapping[str, object]) -> List[JobEvent]:
    """The platform's side of a host's life, as the runner recorded it when it happened (``history``): each start
    of its shim (with that shim's pid), each death it answered (killed and replaced, lost for good), each return.
    A state written before ``history`` was kept: its last start, loss and return only."""
    index = int(str(host["index"]))
    source = f"host {index}"
    history = host.get("history")
    if isinstance(history, list) and history:
        return [_history_event(index, source, str(host.get("address") or ""), entry) for entry in history]
    out = []
    started, pid = host.get("started_at"), host.get("pid")
    if isinstance(started, float):
        shim = f", shim pid {pid}" if isinstance(pid, int) else ""
        out.append(JobEvent(started, source, "Started", f"{host.get('address')}{shim}", host=index))
    lost, back = host.get("lost_at"), host.get("restored_at")
    if isinstance(lost, float):
        out.append(JobEvent(lost, source, "HostLost", "lost for good: its shim and everything under it "
                            "were killed and it is not started again", "Warning", index))  # fmt: skip
    if isinstance(back, float):
        out.append(JobEvent(back, source, "HostBack", "a machine is back for it: its shim was started "
                            "again and joins the job", "Info", index))  # fmt: skip
    return out


_HISTORY_REASONS = {"started": ("Started", "Info"), "killed": ("Killed", "Warning"), "lost": ("HostLost", "Warning"),
                    "back": ("HostBack", "Info")}  # fmt: skip


def _history_event(index: int, source: str, address: str, entry: Mapping[str, Any]) -> JobEvent:
    reason, level = _HISTORY_REASONS[str(entry["kind"])]
    detail = str(entry.get("detail") or "")
    if reason == "Started":
        text = f"{address}, shim pid {entry['pid']}" + (f" ({detail})" if detail else "")
    elif reason == "HostLost":
        text = detail or "lost for good: its shim and everything under it were killed and it is not started again"
    else:
        text = detail or "its shim was started again and joins the job"
    return JobEvent(float(entry["at"]), source, reason, text, level, index)


_MERGED = "; as the platform saw it: "


def _one_loss_each(platform: Sequence[JobEvent], noted: Sequence[JobEvent]) -> List[JobEvent]:
    """The platform's events and the shims' as one list, where a host's loss that both recorded is one
    ``HostLost``: at the earlier time, the coordinator's line (host, address, how it was found lost) followed by
    the platform's account (which shim died, of what, replaced or not). A loss pairs with the other side's first
    loss of that host in the same life of the host (no start or return of it between the two)."""
    merged = list(platform)
    for event in noted:
        partner = None
        if event.reason == "HostLost" and event.host is not None:
            partner = _same_loss(merged[: len(platform)], event)
        if partner is None:
            merged.append(event)
            continue
        lost = merged[partner]
        merged[partner] = JobEvent(min(lost.time, event.time), lost.source, "HostLost",
                                   f"{event.message}{_MERGED}{lost.message}", lost.level, lost.host)  # fmt: skip
    return merged


def _same_loss(platform: Sequence[JobEvent], noted: JobEvent) -> Optional[int]:
    """The index of the platform's loss of ``noted``'s host in the same life of the host, if any and not merged."""
    mine = [(i, e) for i, e in enumerate(platform) if e.host == noted.host]
    for index, lost in mine:
        if lost.reason != "HostLost" or _MERGED in lost.message:
            continue
        early, late = min(lost.time, noted.time), max(lost.time, noted.time)
        if not any(e.reason in ("Started", "HostBack") and early < e.time <= late for _, e in mine):
            return index
    return None


def _shim_events(paths: JobPaths, log_dirs: Mapping[object, object], count: int) -> List[JobEvent]:
    """What the hosts' shims learned of the job's hosts as it happened (their ``events.jsonl``: a change of an
    elastic job's hosts, a host lost or back as the job's coordinator saw it, the wait for a lost host, a restart
    of the job with its root cause), and the changes their reports recorded (``hosts.membership``, for a shim
    that kept no events file): each once however many hosts saw it, at the earliest time one did."""
    seen: Dict[Tuple[str, str], JobEvent] = {}

    def add(event: JobEvent) -> None:
        key = (event.reason, event.message)
        if key not in seen or event.time < seen[key].time:
            seen[key] = event

    for index in range(count):
        log_dir = log_dirs.get(index)
        for noted in read_events(events_file(log_dir)) if isinstance(log_dir, str) else []:
            host = noted["host"]
            source = f"host {host}" if host is not None and noted["reason"] in ("HostLost", "HostBack") else "job"
            add(JobEvent(noted["at"], source, noted["reason"], noted["line"], noted["level"], host))
        hosts = (read_json(paths.report_file(index)) or {}).get("hosts")
        changes = hosts.get("membership") if isinstance(hosts, Mapping) else None
        for change in changes if isinstance(changes, list) else []:
            if not isinstance(change, Mapping) or not isinstance(change.get("at"), (int, float)):
                continue
            line = str(change.get("line") or f"the job's hosts changed: {change.get('members')}")[:1000]
            add(JobEvent(float(change["at"]), "job", "HostsChanged", line, "Warning" if change.get("left") else "Info"))
    return list(seen.values())


def event_files(paths: JobPaths) -> List[str]:
    """Every file :func:`local_events` reads its events from: the state file, and each host's report, attempt
    and events files (what a follower watches)."""
    request = (read_json(paths.plan_file) or {}).get("request") or {}
    files = [paths.state_file]
    for host in request.get("hosts") or []:
        index = host.get("index")
        if isinstance(index, int):
            files.append(paths.report_file(index))
        log_dir = (host.get("env") or {}).get("MALAUNCH_LOG_DIR")
        if isinstance(log_dir, str):
            files.extend([attempt_file(log_dir), events_file(log_dir)])
    return files


def local_events(paths: JobPaths) -> List[JobEvent]:
    """The job's recorded events, oldest first (see the module docstring)."""
    reading = read_state(paths.state_file)
    data = reading.data
    if data is None:
        raise JobStateUnknown(paths.job_id, reading.problem)
    out: List[JobEvent] = []
    platform: List[JobEvent] = []
    if data["created_at"] is not None:
        out.append(JobEvent(data["created_at"], "job", "Submitted", f"job {paths.job_id} ({data['name']})"))
    if data["started_at"] is not None:
        out.append(JobEvent(data["started_at"], "job", "RunnerStarted", f"the job runner started, pid "
                            f"{data['runner_pid']}"))  # fmt: skip
    request = (read_json(paths.plan_file) or {}).get("request") or {}
    log_dirs = {h.get("index"): (h.get("env") or {}).get("MALAUNCH_LOG_DIR") for h in request.get("hosts") or []}
    for host in data["hosts"]:
        index, source = host["index"], f"host {host['index']}"
        if host["started_at"] is not None:  # the report is its last shim's: its attempts count from its start
            out.extend(_report_events(index, paths.report_file(index), host["started_at"]))
        log_dir = log_dirs.get(index)
        announced = read_attempt(attempt_file(log_dir)) if isinstance(log_dir, str) else None
        when = _mtime(attempt_file(log_dir)) if isinstance(log_dir, str) else None
        if announced is not None and when is not None and announced["attempt"] > 0 and host["state"] != "EXITED":
            out.append(JobEvent(when, source, "Attempt", f"attempt {announced['attempt']} is {announced['state']}",
                                "Warning", index))  # fmt: skip
        platform.extend(_membership_events(host))
        if host["state"] == "EXITED" and host["ended_at"] is not None and not is_lost(host):
            code = host["exit_code"]
            level = "Info" if code in (0, _SIGTERM_CODE) else "Error"
            detail = f"; {host['detail']}" if host["detail"] else ""
            out.append(JobEvent(host["ended_at"], source, "Exited", f"exit code {code}{detail}", level, index))
    out.extend(_one_loss_each(platform, _shim_events(paths, log_dirs, len(data["hosts"]))))
    if JobState(data["state"]).is_terminal and data["ended_at"] is not None:
        level = "Info" if data["state"] != "FAILED" else "Error"
        text = f"exit code {data['exit_code']}" + (f": {data['message']}" if data["message"] else "")
        out.append(JobEvent(data["ended_at"], "job", data["state"].capitalize(), text, level))
    return sorted(out, key=lambda event: event.time)
