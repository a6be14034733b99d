"""The local backend's job state (``state.json``): its schema, validated reads, safe writes, and the job's status.

Contract:

1. ``state.json`` carries ``"version": STATE_VERSION``. :func:`read_state` never raises: a missing, empty,
   truncated, binary or wrongly shaped file gives a :class:`StateReading` with ``data=None`` and a one-line
   ``problem`` (``hosts[1].pid must be a whole number > 1 or null, got 'x'``).
2. Writes are atomic (temporary file, fsync, rename). :class:`StateWriter` never raises either: a failed
   write is kept (``disk_full`` for lack of space, else ``write_error``) and written as soon as a write
   succeeds again. The record of the end never depends on free space: a reserve file made at the start is
   given up for it, and failing that it is written over ``state.json`` in place, in the blanks every write
   leaves after the JSON.
3. :func:`job_status` turns a reading into a :class:`~malaunch.sdk.status.JobStatus`. A damaged file is
   ``UNKNOWN`` with its reason. When the runner is gone before recording the end, each host's result is
   taken from its shim's own JSON report, so a job whose hosts finished is still SUCCEEDED or FAILED.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence

from ...errors import show_value
from ...home import write_json_atomic
from ...status import HostState, HostStatus, JobState, JobStatus
from .jobdir import JobPaths

__all__ = [
    "HISTORY_KINDS",
    "HISTORY_MAX",
    "RESERVE_BYTES",
    "SLACK_BYTES",
    "STATE_VERSION",
    "HostReport",
    "StateReading",
    "StateWriter",
    "attempt_cause",
    "disk_space_note",
    "is_lost",
    "job_status",
    "note_history",
    "new_state",
    "read_host_report",
    "read_state",
    "report_detail",
    "validate_state",
]

STATE_VERSION = 1
RESERVE_BYTES = 256 << 10
SLACK_BYTES = 4 << 10  # blanks after the JSON of state.json: room to record the end in place on a full disk
_MAX_BYTES = 16 << 20
_LOW_SPACE = 64 << 10
_PAGE = 4 << 10
_JOB_STATES = ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED")
_HOST_STATES = ("PENDING", "RUNNING", "EXITED")


class _Damaged(ValueError):
    """One reason why a state file cannot be used."""


class StateReading(NamedTuple):
    """A validated ``state.json`` (``data``), or ``data=None`` and why (``problem``)."""

    data: Optional[Dict[str, Any]]
    problem: str = ""


def _int(data: Mapping[str, Any], key: str, where: str, *, low: Optional[int] = None) -> Optional[int]:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
        bound = f" >= {low}" if low is not None else ""
        raise _Damaged(f"{where}{key} must be a whole number{bound} or null, got {show_value(value)}")
    return value


def _time(data: Mapping[str, Any], key: str, where: str) -> Optional[float]:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise _Damaged(f"{where}{key} must be seconds since the epoch or null, got {show_value(value)}")
    return float(value)


def _text(data: Mapping[str, Any], key: str, where: str, *, optional: bool = True) -> Optional[str]:
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _Damaged(f"{where}{key} must be a string, got {show_value(value)}")
    return value


def _choice(data: Mapping[str, Any], key: str, where: str, choices: Sequence[str]) -> str:
    value = data.get(key)
    if value not in choices:
        raise _Damaged(f"{where}{key} must be one of {', '.join(choices)}, got {show_value(value)}")
    return str(value)


def _host(raw: object, position: int) -> Dict[str, Any]:
    where = f"hosts[{position}]."
    if not isinstance(raw, dict):
        raise _Damaged(f"hosts[{position}] must be an object, got {show_value(raw)}")
    return {
        "index": _int(raw, "index", where, low=0) if raw.get("index") is not None else position,
        "address": _text(raw, "address", where) or "",
        "state": _choice(raw, "state", where, _HOST_STATES),
        "pid": _int(raw, "pid", where, low=2),
        "exit_code": _int(raw, "exit_code", where),
        "started_at": _time(raw, "started_at", where),
        "ended_at": _time(raw, "ended_at", where),
        "log_file": _text(raw, "log_file", where),
        "detail": _text(raw, "detail", where) or "",
        "lost_at": _time(raw, "lost_at", where),  # the platform lost it for good (local/hostops.py)
        "restored_at": _time(raw, "restored_at", where),  # ... and started it again
        "history": _history(raw.get("history"), where),
    }


#: What the runner records of a host as it happens (``history``): each start of its shim, each death of it the
#: platform answers (killed and replaced, lost for good), each return. ``ma-submit events`` shows every one.
HISTORY_KINDS = ("started", "killed", "lost", "back")
HISTORY_MAX = 200  # entries kept per host (the oldest are dropped): a host replaced again and again stays small


def _history(raw: object, where: str) -> List[Dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _Damaged(f"{where}history must be a list or null, got {show_value(raw)}")
    found = []
    for position, entry in enumerate(raw[-HISTORY_MAX:]):
        at = f"{where}history[{position}]."
        if not isinstance(entry, dict):
            raise _Damaged(f"{where}history[{position}] must be an object, got {show_value(entry)}")
        when = _time(entry, "at", at)
        if when is None:
            raise _Damaged(f"{at}at must be seconds since the epoch, got null")
        found.append({"at": when, "kind": _choice(entry, "kind", at, HISTORY_KINDS),
                      "pid": _int(entry, "pid", at, low=2), "exit_code": _int(entry, "exit_code", at),
                      "signal": _int(entry, "signal", at, low=1), "detail": _text(entry, "detail", at) or ""})
    return found


def note_history(host: Dict[str, Any], kind: str, at: float, *, pid: Optional[int] = None,
                 exit_code: Optional[int] = None, signal: Optional[int] = None, detail: str = "") -> None:
    """Add an entry to a host record's ``history`` (in place; at most :data:`HISTORY_MAX` kept)."""
    if kind not in HISTORY_KINDS:
        raise ValueError(f"unknown history kind {kind!r}")
    history = host.setdefault("history", [])
    history.append({"at": at, "kind": kind, "pid": pid, "exit_code": exit_code, "signal": signal, "detail": detail})
    del history[:-HISTORY_MAX]


def is_lost(host: Mapping[str, Any]) -> bool:
    """Whether a host of a validated state is lost for good now (lost, and not started again since)."""
    lost, back = host.get("lost_at"), host.get("restored_at")
    return lost is not None and (back is None or back < lost)


def validate_state(raw: object) -> Dict[str, Any]:
    """The state in ``raw`` with every field checked and defaulted; raises ``ValueError`` with one reason."""
    if not isinstance(raw, dict):
        raise _Damaged(f"holds a JSON {type(raw).__name__}, not an object")
    version = _int(raw, "version", "", low=1)
    if version is None:
        raise _Damaged("has no version")
    if version > STATE_VERSION:
        raise _Damaged(f"has version {version}, newer than this malaunch ({STATE_VERSION}); upgrade malaunch")
    hosts = raw.get("hosts")
    if not isinstance(hosts, list):
        raise _Damaged(f"hosts must be a list, got {show_value(hosts)}")
    failure = raw.get("first_failure")
    if failure is not None:
        if not isinstance(failure, dict):
            raise _Damaged(f"first_failure must be an object or null, got {show_value(failure)}")
        failure = {"host": _int(failure, "host", "first_failure."), "exit_code": _int(failure, "exit_code", "")}
    job_id = _text(raw, "job_id", "", optional=False)
    return {
        "version": version,
        "job_id": job_id,
        "name": _text(raw, "name", "") or "",
        "state": _choice(raw, "state", "", _JOB_STATES),
        "exit_code": _int(raw, "exit_code", ""),
        "message": _text(raw, "message", "") or "",
        "created_at": _time(raw, "created_at", ""),
        "started_at": _time(raw, "started_at", ""),
        "ended_at": _time(raw, "ended_at", ""),
        "runner_pid": _int(raw, "runner_pid", "", low=2),
        "first_failure": failure,
        "write_error": _text(raw, "write_error", ""),
        "disk_full": _text(raw, "disk_full", ""),
        "hosts": [_host(host, position) for position, host in enumerate(hosts)],
        "keep_for": _time(raw, "keep_for", ""),
    }


def _load(path: str) -> object:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(_MAX_BYTES + 1)
    except FileNotFoundError:
        raise _Damaged("is missing") from None
    except OSError as exc:
        raise _Damaged(f"cannot be read ({exc.strerror or exc})") from None
    if not raw.strip():
        raise _Damaged("is empty")
    if len(raw) > _MAX_BYTES:
        raise _Damaged(f"is larger than {_MAX_BYTES >> 20} MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Damaged("is not UTF-8 text (binary data)") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise _Damaged("is nested too deeply") from None
    except ValueError as exc:
        raise _Damaged(f"is not valid JSON, truncated or corrupted ({exc})") from None


def read_state(path: str) -> StateReading:
    """Read and validate ``path``; never raises (see the module docstring)."""
    try:
        return StateReading(validate_state(_load(path)))
    except _Damaged as damaged:
        return StateReading(None, f"state.json {damaged}")


def new_state(
    job_id: str, name: str, created_at: float, hosts: Sequence[Mapping[str, Any]], keep_for: Optional[float] = None
) -> Dict[str, Any]:
    """The state of a job that was just submitted; ``hosts`` gives each host's index, address and log file;
    ``keep_for``: the job file's seconds to keep the job once it ended (None: until pruned)."""
    return {
        "version": STATE_VERSION, "job_id": job_id, "name": name, "state": "PENDING", "exit_code": None,
        "message": "", "created_at": created_at, "started_at": None, "ended_at": None, "runner_pid": None,
        "first_failure": None, "write_error": None, "disk_full": None, "keep_for": keep_for,
        "hosts": [
            {"index": h["index"], "address": h["address"], "state": "PENDING", "pid": None, "exit_code": None,
             "started_at": None, "ended_at": None, "log_file": h["log_file"], "detail": "", "history": []}
            for h in hosts
        ],
    }  # fmt: skip


def _reserve_path(paths: JobPaths) -> str:
    return os.path.join(paths.job_dir, ".state-reserve")


class StateWriter:
    """Writes one job's ``state.json``; a failed write is remembered, never raised.

    A failure for lack of space goes to ``disk_full`` (one sentence: the job's state and logs could not be
    written in full), any other to ``write_error``; either is written with the next write that works. The
    reserve and the slack are kept for the record of the end (:meth:`save_final`), which must not be lost:
    every write leaves :data:`SLACK_BYTES` of trailing blanks in ``state.json``, so that when even the freed
    reserve is taken by someone else the end is still written over the file in place.
    """

    def __init__(self, paths: JobPaths) -> None:
        self.paths = paths
        self.failure: Optional[str] = None
        self.full: Optional[str] = None

    def make_reserve(self) -> None:
        """Set aside room on the job's disk, given up for the record of the end: :data:`RESERVE_BYTES`, at most
        an eighth of the free space, whole or not at all. The logs come first: a reserve that did not fit whole
        would hold the disk's last free bytes for the whole run and leave none to the job's output."""
        path = _reserve_path(self.paths)
        try:
            info = os.statvfs(self.paths.job_dir)
            size = min(RESERVE_BYTES, info.f_bavail * info.f_frsize // 8) // _PAGE * _PAGE
            if size <= 0:
                return
            with open(path, "wb") as handle:
                handle.write(b"\0" * size)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(path)

    def drop_reserve(self) -> None:
        """Give the reserve back once the job has ended."""
        with contextlib.suppress(OSError):
            os.unlink(_reserve_path(self.paths))

    def _merge(self, state: Dict[str, Any]) -> None:
        if self.failure is not None:
            state["write_error"] = self.failure
        if self.full is not None and not state.get("disk_full"):
            state["disk_full"] = self.full

    def save(self, state: Dict[str, Any]) -> bool:
        """Write ``state`` atomically (with the failures so far). True when written."""
        self._merge(state)
        try:
            write_json_atomic(self.paths.state_file, state, slack=SLACK_BYTES)
            return True
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                self.full = disk_space_note(self.paths.job_dir) or _full_sentence(self.paths.job_dir, "")
            elif self.failure is None:
                self.failure = f"writing {self.paths.state_file} failed: {exc.strerror or exc}"
            return False

    def save_final(self, state: Dict[str, Any]) -> bool:
        """Record the end: give up the reserve, write atomically, and if that fails too, write over
        ``state.json`` in place within its size (its slack). True when written."""
        self.drop_reserve()
        if self.save(state):
            return True
        self._merge(state)
        return _overwrite(self.paths.state_file, state)


def _overwrite(path: str, data: Mapping[str, Any]) -> bool:
    """Write ``data`` over the JSON file ``path`` in place, padded with blanks to its size (no new blocks)."""
    text = json.dumps(data, indent=2, sort_keys=True).encode("utf-8") + b"\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        size = os.fstat(fd).st_size
        if len(text) > size:
            return False
        os.pwrite(fd, text + b" " * (size - len(text)), 0)
        os.fsync(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _full_sentence(path: str, free: str) -> str:
    return f"the disk holding {path} is full{free}: the job's state and logs could not be written completely"


def disk_space_note(path: str) -> Optional[str]:
    """A sentence when the file system holding ``path`` is (nearly) full, else None."""
    try:
        info = os.statvfs(path)
    except OSError:
        return None
    free = info.f_bavail * info.f_frsize
    if free >= _LOW_SPACE:
        return None
    return _full_sentence(path, f" ({free} bytes free)")


class HostReport(NamedTuple):
    """What a host's shim reported about its own end (``report.json``)."""

    exit_code: int
    status: str
    detail: str
    written_at: float
    lost_output: str = ""  # the log files it could not write to the end, and from which byte (a full disk)
    cause_host: Optional[int] = None  # several hosts: the host the job's root cause is on, as the shims agreed


def _lost_output(report: Mapping[str, Any]) -> str:
    """``<log> holds the output up to byte N (<reason>)`` for each log file the shim could not write to the end."""
    entries = report.get("lost_output")
    said: List[str] = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("from_byte"), int):
            path, reason = entry.get("log_file"), entry.get("reason")
            said.append(
                f"{path if isinstance(path, str) else 'a log file'} holds the output up to byte {entry['from_byte']}, "
                f"the rest was lost ({reason if isinstance(reason, str) else 'write failed'})"
            )
    return "; ".join(said)


def report_detail(report: Mapping[str, Any]) -> str:
    lost = _lost_output(report)
    said = _cause_detail(report)
    return f"{said}; {lost}" if said and lost else said or lost


def _cause_detail(report: Mapping[str, Any]) -> str:
    """``root cause ...``: the job's root cause as the hosts' coordinator chose it (the last attempt's
    ``job_cause``), else the shim's own (:func:`attempt_cause`); or how the shim was stopped. A shim stopped in the
    back-off after a failed attempt says so first, then that attempt's root cause with the attempt's own class
    (the job's, ``stopped``, is the stop's)."""
    attempts = report.get("attempts")
    last = attempts[-1] if isinstance(attempts, list) and attempts and isinstance(attempts[-1], dict) else {}
    signal_name, in_backoff = report.get("shim_signal_name"), report.get("stopped_in_backoff")
    if isinstance(signal_name, str) and isinstance(in_backoff, int) and "attempt" in last:
        stop = f"shim stopped by {signal_name} during the back-off after attempt {last['attempt']}"
        before = attempt_cause(last)
        return f"{stop}; attempt {last['attempt']}'s root cause {before}" if before else stop
    said = attempt_cause(last, report.get("root_cause"), report.get("failure_class"))
    if said:
        return f"root cause {said}"
    if isinstance(report.get("shim_signal_name"), str):
        return f"shim stopped by {report['shim_signal_name']}"
    return ""


def attempt_cause(attempt: Mapping[str, Any], own: object = None, kind: object = None) -> str:
    """One line for an attempt's root cause (a report's ``attempts[i]``): the coordinator's choice
    (``job_cause``) when there is one, else the shim's own root cause (``own``, default the attempt's, with its
    class ``kind``); "" when it has none."""
    from malaunch.entrypoint.public import describe_cause

    chosen = attempt.get("job_cause")
    if isinstance(chosen, dict):
        return describe_cause(chosen)
    failure = own if own is not None else attempt.get("root_cause")
    if not isinstance(failure, dict):
        return ""
    kind = kind if kind is not None else attempt.get("failure_class")
    kind = kind.get("class") if isinstance(kind, dict) else kind
    tail = failure.get("tail")
    return describe_cause({
        "rank": failure.get("rank"), "name": failure.get("name"), "code": failure.get("exit_code"),
        "signal": failure.get("signal"), "kind": kind, "log": failure.get("log_file"),
        "line": tail[-1] if isinstance(tail, list) and tail else "", "addr": failure.get("host"),
        "ended": failure.get("source") == "peer",
    })  # fmt: skip


def read_host_report(path: str) -> Optional[HostReport]:
    """The shim's report in ``path``, or None when it is missing or not a report."""
    try:
        data = _load(path)
        written_at = os.stat(path).st_mtime
    except (_Damaged, OSError):
        return None
    if not isinstance(data, dict):
        return None
    code, status = data.get("exit_code"), data.get("status")
    if isinstance(code, bool) or not isinstance(code, int) or not isinstance(status, str):
        return None
    return HostReport(code, status, report_detail(data), written_at, _lost_output(data), _cause_host(data))


def _cause_host(report: Mapping[str, Any]) -> Optional[int]:
    """The host of the job's root cause, from the last attempt's ``job_cause`` (coordinated jobs only)."""
    attempts = report.get("attempts")
    last = attempts[-1] if isinstance(attempts, list) and attempts else None
    cause = last.get("job_cause") if isinstance(last, dict) else None
    host = cause.get("host") if isinstance(cause, dict) else None
    return host if isinstance(host, int) and not isinstance(host, bool) and host >= 0 else None


def _host_status(host: Mapping[str, Any]) -> HostStatus:
    return HostStatus(
        index=host["index"], address=host["address"], state=HostState(host["state"]), pid=host["pid"],
        exit_code=host["exit_code"], started_at=host["started_at"], ended_at=host["ended_at"],
        log_file=host["log_file"], detail=host["detail"],
    )  # fmt: skip


def _recover(data: Dict[str, Any], paths: JobPaths, runner: Optional[int], is_ours: Callable[[int], bool]) -> None:
    """The runner is gone without recording the end: fill in each host from its shim's report (in place)."""
    running: List[int] = []
    for host in data["hosts"]:
        if host["state"] == "EXITED":
            continue
        report = read_host_report(paths.report_file(host["index"]))
        if report is not None:
            host.update(state="EXITED", exit_code=report.exit_code, detail=report.detail, ended_at=report.written_at)
        elif host["pid"] is not None and is_ours(host["pid"]):
            running.append(host["index"])
        elif host["state"] == "RUNNING":
            host.update(state="EXITED", detail="ended without writing its report")
    gone = f"the job runner (pid {runner}) ended without recording the result"
    if running:
        data.update(state="RUNNING", message=f"{gone}; hosts {running} still run, their reports will give it")
        return
    if not any(host["state"] == "EXITED" for host in data["hosts"]):
        data.update(state="FAILED", message=f"{gone} before starting any host; see {paths.runner_log}")
        return
    failed = [h for h in data["hosts"] if (h["state"] != "EXITED" or h["exit_code"] != 0) and not is_lost(h)]
    if not failed:
        data.update(state="SUCCEEDED", exit_code=0, message=f"{gone}; every host's report says it succeeded")
    else:
        first = min(failed, key=lambda h: (not h["detail"].startswith("root cause"), h["ended_at"] or math.inf))
        code = first["exit_code"]
        stopped = all(h["detail"].startswith("shim stopped") for h in failed)
        data.update(
            state="STOPPED" if stopped else "FAILED",
            exit_code=code,
            message=f"{gone}; host {first['index']} " + ("was stopped" if stopped else f"exited with {code}"),
        )
    data["ended_at"] = max((h["ended_at"] or 0.0 for h in data["hosts"]), default=None) or data["ended_at"]


def job_status(
    paths: JobPaths,
    reading: StateReading,
    *,
    backend: str,
    runner_pid: Optional[int],
    is_ours: Callable[[int], bool],
) -> JobStatus:
    """The status of the job in ``paths`` from ``reading``. ``is_ours(pid)`` proves a process is the job's;
    ``runner_pid`` is the runner's pid when known (None: the runner was not started yet)."""
    if reading.data is None:
        return JobStatus(
            id=paths.job_id, backend=backend, state=JobState.UNKNOWN, raw_state="damaged", location=paths.job_dir,
            message=f"{reading.problem}; the job's files are in {paths.job_dir} ('ma-submit delete {paths.job_id}' "
            "removes them)",
        )  # fmt: skip
    data = {**reading.data, "hosts": [dict(h) for h in reading.data["hosts"]]}
    if not JobState(data["state"]).is_terminal and runner_pid is not None and not is_ours(runner_pid):
        _recover(data, paths, runner_pid, is_ours)
    notes = [text for text in (data["write_error"], data["disk_full"]) if text]
    message = "; ".join([data["message"], *notes]) if data["message"] else "; ".join(notes)
    return JobStatus(
        id=paths.job_id, backend=backend, state=JobState(data["state"]), exit_code=data["exit_code"],
        message=message, raw_state=data["state"], name=data["name"], created_at=data["created_at"],
        started_at=data["started_at"], ended_at=data["ended_at"],
        hosts=tuple(_host_status(h) for h in data["hosts"]), location=paths.job_dir,
    )  # fmt: skip
