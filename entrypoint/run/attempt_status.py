"""Where a host's shim says which attempt it runs, and what happens to the job's hosts, for whoever looks
(``ma-submit status`` shows a restart in progress, ``ma-submit events`` what happened). Nothing coordinates
through these files: the hosts' coordinator (:mod:`.hosts`) keeps the job's attempts in step.

``<log dir>/attempt.json``: with ``MA_MAX_RESTARTS`` > 0 (or an elastic job) the shim writes it atomically at
every change (:func:`announce_attempt`): ``{"attempt": K, "state": "running" | "backoff" | "waiting" | "ended",
"pid": <shim pid>}``; ``backoff`` means attempt K failed and K+1 will start after the back-off (and, on several
hosts, once every host is there); ``waiting`` (several hosts) means the hosts wait for a lost one, and then
``waiting`` says which and until when: ``{"host", "addr", "why", "until"}`` (``until``: seconds since the epoch).

``<log dir>/events.jsonl``: what a host's shim learns of the job's hosts as it happens (:func:`note_event`), one
JSON object a line, appended: ``{"at", "reason", "level", "line"}`` and ``host`` (the host it is about, if one).
``reason`` is one of :data:`EVENT_REASONS`.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any, Dict, List, Optional

from ..report.reportfile import write_report

__all__ = ["ATTEMPT_FILE", "EVENTS_FILE", "EVENT_REASONS", "announce_attempt", "attempt_file", "events_file",
           "note_event", "read_attempt", "read_events"]  # fmt: skip

ATTEMPT_FILE = "attempt.json"
EVENTS_FILE = "events.jsonl"
_STATES = ("running", "backoff", "waiting", "ended")
#: What a shim notes in its events file: the job's hosts changed (elastic), a host lost or back as the job's
#: coordinator saw it, the hosts wait for a lost one, an attempt of the job ended and the next one starts.
EVENT_REASONS = ("HostsChanged", "HostLost", "HostBack", "WaitingForHost", "JobRestart")
_LEVELS = ("Info", "Warning", "Error")
_LINE_MAX = 1000
_EVENTS_MAX = 1 << 20  # bytes of the events file read (its end); a job whose hosts change all day stays readable


def attempt_file(log_dir: str) -> str:
    """Where a shim with log directory ``log_dir`` announces its attempt."""
    return os.path.join(log_dir, ATTEMPT_FILE)


def events_file(log_dir: str) -> str:
    """Where a shim with log directory ``log_dir`` notes what it learns of the job's hosts."""
    return os.path.join(log_dir, EVENTS_FILE)


def announce_attempt(log_dir: str, attempt: int, state: str, waiting: Optional[Dict[str, Any]] = None) -> None:
    """Write ``<log dir>/attempt.json`` atomically (best effort: it only informs); ``waiting``: the lost host the
    hosts wait for (state ``waiting``)."""
    if state not in _STATES:
        raise ValueError(f"unknown attempt state {state!r}")

    data: Dict[str, Any] = {"attempt": attempt, "state": state, "pid": os.getpid()}
    if state == "waiting" and waiting is not None:
        data["waiting"] = waiting
    write_report(attempt_file(log_dir), data)


def _waiting(value: object) -> Optional[Dict[str, Any]]:
    if not isinstance(value, dict):
        return None
    host, addr, why, until = value.get("host"), value.get("addr"), value.get("why"), value.get("until")
    if not (isinstance(host, int) and not isinstance(host, bool) and host >= 0 and isinstance(addr, str)
            and isinstance(why, str) and isinstance(until, (int, float)) and not isinstance(until, bool)
            and math.isfinite(until)):  # fmt: skip
        return None
    return {"host": host, "addr": addr[:300], "why": why[:_LINE_MAX], "until": float(until)}


def read_attempt(path: str) -> Optional[Dict[str, Any]]:
    """A host's announcement, read defensively: None unless it is whole and well-formed (a ``waiting`` that is
    not well-formed is left out)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.loads(handle.read(8192))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    attempt, state, pid = data.get("attempt"), data.get("state"), data.get("pid")
    if not (isinstance(attempt, int) and isinstance(pid, int) and state in _STATES):
        return None
    found: Dict[str, Any] = {"attempt": attempt, "state": state, "pid": pid}
    waiting = _waiting(data.get("waiting")) if state == "waiting" else None
    if waiting is not None:
        found["waiting"] = waiting
    return found


def note_event(log_dir: str, reason: str, line: str, level: str = "Info", host: Optional[int] = None) -> None:
    """Append one event to ``<log dir>/events.jsonl`` now (best effort: it only informs); ``host``: the host it is
    about, if one. One ``write`` of one line, appended: a reader sees it whole or not at all."""
    if reason not in EVENT_REASONS or level not in _LEVELS:
        raise ValueError(f"unknown event {reason!r} or level {level!r}")
    record: Dict[str, Any] = {"at": round(time.time(), 3), "reason": reason, "level": level, "line": line[:_LINE_MAX]}
    if host is not None:
        record["host"] = host
    data = (json.dumps(record, separators=(",", ":"), ensure_ascii=True) + "\n").encode("ascii")
    try:
        fd = os.open(events_file(log_dir), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return
    try:
        os.write(fd, data)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_events(path: str) -> List[Dict[str, Any]]:
    """The events in a shim's events file, oldest first, read defensively: a line that is not a whole event (cut
    short, damaged, unknown) is left out; past :data:`_EVENTS_MAX` bytes only the file's end is read."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - _EVENTS_MAX))
            raw = handle.read(_EVENTS_MAX)
    except OSError:
        return []
    found: List[Dict[str, Any]] = []
    for line in raw.split(b"\n"):
        try:
            data = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        at, reason, level, text = data.get("at"), data.get("reason"), data.get("level"), data.get("line")
        if (isinstance(at, (int, float)) and not isinstance(at, bool) and math.isfinite(at) and at >= 0
                and reason in EVENT_REASONS and level in _LEVELS and isinstance(text, str)):  # fmt: skip
            host = data.get("host")
            host = host if isinstance(host, int) and not isinstance(host, bool) and host >= 0 else None
            found.append({"at": float(at), "reason": reason, "level": level, "line": text[:_LINE_MAX], "host": host})
    return found
