"""Follow a job: its log lines interleaved with progress (hosts starting and ending, heartbeats), then the end.

:func:`follow_job` works with any backend through a :class:`~malaunch.sdk.backends.base.JobHandle`. The log
iterator runs in a helper thread so that waiting for output never hides progress: while nothing is printed,
a heartbeat event comes at least every ``heartbeat`` seconds. The last event has ``kind == "end"`` and the
job's final status. The submitter stopping to follow (Ctrl-C, SIGKILL) does not affect the job. A status
stuck in ``UNKNOWN`` (a damaged record) ends following with :class:`~malaunch.sdk.errors.JobStateUnknown`.
"""

from __future__ import annotations

import contextlib
import queue
import re
import signal
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, Optional

from .backends.base import JobHandle, UnknownWatch
from .errors import JobStateUnknown
from .status import HostState, HostStatus, JobState, JobStatus, describe_end

__all__ = ["FollowEvent", "follow_job"]

_EOF = object()
_LEFT = re.compile(r"\d+ s left")  # a wait's time left: the heartbeats say how it runs down
_SIGTERM_CODE = 128 + signal.SIGTERM


@dataclass(frozen=True)
class FollowEvent:
    """``kind`` is ``"log"`` (a job output line), ``"progress"`` (a state change or heartbeat) or ``"end"``."""

    kind: str
    text: str
    status: Optional[JobStatus] = None


def _host_changes(before: Dict[int, HostStatus], status: JobStatus) -> Iterator[str]:
    for host in status.hosts:
        old = before.get(host.index)
        if old is not None and (old.state, old.exit_code, old.pid) == (host.state, host.exit_code, host.pid):
            continue
        again = old is not None and None not in (old.pid, host.pid) and old.pid != host.pid  # started again
        if host.state is HostState.RUNNING and (old is None or old.state is not HostState.RUNNING or again):
            yield f"host {host.index} ({host.address}) started" + ("" if host.pid is None else f", pid {host.pid}")
        elif host.state is HostState.PENDING and old is not None and old.state is HostState.RUNNING:
            yield f"host {host.index} ({host.address}) ended" + (f": {host.detail}" if host.detail else "")
        elif host.state is HostState.EXITED and (old is None or old.state is not HostState.EXITED):
            name = f"host {host.index} ({host.address})"
            if host.detail.startswith("lost"):  # the platform lost it (its machine gone): the others decide
                yield f"{name} {host.detail}" + (f" (exit code {host.exit_code})" if host.exit_code is not None and
                                                 "exit" not in host.detail else "")  # fmt: skip
            elif host.exit_code is None:  # the backend knows it ended, not how: that is no failure
                yield f"{name} ended ({status.state.value.lower()} job; the platform reports no exit code)"
            elif host.exit_code == 0:
                yield f"{name} finished, exit code 0"
            elif host.exit_code == _SIGTERM_CODE:
                yield f"{name} was stopped (SIGTERM), exit code {host.exit_code}"
            else:
                detail = f"; {host.detail}" if host.detail else ""
                console = f"; console: {host.log_file}" if host.log_file else ""
                yield f"{name} failed, exit code {host.exit_code}{detail}{console}"


def _heartbeat(status: JobStatus, elapsed: float, silent: float) -> str:
    running = [h.index for h in status.hosts if h.state is HostState.RUNNING]
    ended = [
        f"{h.index}={'unknown' if h.exit_code is None else h.exit_code}"
        for h in status.hosts
        if h.state is HostState.EXITED
    ]
    parts = [f"job {status.id} {status.state.value} for {elapsed:.0f}s"]
    parts.append(f"hosts running: [{', '.join(map(str, running))}]")
    if ended:
        parts.append(f"hosts ended (host=exit code): {', '.join(ended)}")
    parts.append(f"no output for {silent:.0f}s")
    if status.pending_reason:
        parts.append(f"waiting: {status.pending_reason}")
    return "; ".join(parts)


def _pump(handle: JobHandle, out: queue.Queue[object]) -> None:
    try:
        for line in handle.logs(follow=True):
            out.put(line)
    except BaseException as exc:
        out.put(exc)
    out.put(_EOF)


#: How long the first output line waits for the job's record to say it runs (the line proves it does).
_START_RECORD_WAIT = 2.0


def _started(handle: JobHandle, clock: Callable[[], float]) -> JobStatus:
    """The status once it is no longer PENDING: a host's output can come before the record of its start."""
    deadline = clock() + _START_RECORD_WAIT
    status = handle.status()
    while status.state is JobState.PENDING and clock() < deadline:
        time.sleep(0.05)
        status = handle.status()
    return status


def follow_job(
    handle: JobHandle,
    *,
    heartbeat: float = 10.0,
    poll: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[FollowEvent]:
    """Events of ``handle``'s job until it ends (see the module docstring)."""
    lines: queue.Queue[object] = queue.Queue()
    threading.Thread(target=_pump, args=(handle, lines), name=f"logs-{handle.id}", daemon=True).start()
    start = last_output = last_beat = last_poll = clock()
    seen = _Seen()
    eof = False
    watch = UnknownWatch(clock=clock)
    while True:
        item: object = None
        with contextlib.suppress(queue.Empty):
            item = lines.get(timeout=poll)
        if isinstance(item, str):
            last_output = clock()
            if not seen.state:  # the first output: the job's and its hosts' start are said before it
                yield from seen.progress(_started(handle, clock))
                last_poll = clock()
            yield FollowEvent("log", item)
            if clock() - last_poll < poll:
                continue
        elif isinstance(item, BaseException):
            raise item
        elif item is _EOF:
            eof = True
        last_poll = clock()
        status = handle.status()
        yield from seen.progress(status)
        if watch.gave_up(status):
            raise JobStateUnknown(status.id, status.message)
        if status.is_terminal and eof:
            yield FollowEvent("end", describe_end(status), status)
            return
        now = clock()
        if now - last_output >= heartbeat and now - last_beat >= heartbeat:
            last_beat = now
            yield FollowEvent("progress", _heartbeat(status, now - start, now - last_output), status)


class _Seen:
    """What following has said so far (the state, the pending reason, the hosts): each change is said once."""

    def __init__(self) -> None:
        self.state = ""
        self.reason = ""
        self.hosts: Dict[int, HostStatus] = {}

    def progress(self, status: JobStatus) -> Iterator[FollowEvent]:
        """The progress events of ``status`` that were not said yet."""
        if status.state.value != self.state:
            self.state = status.state.value
            if not status.is_terminal:
                yield FollowEvent("progress", f"job {status.id} is {status.state.value}", status)
        if _LEFT.sub("", status.pending_reason) != self.reason and not status.is_terminal:
            self.reason = _LEFT.sub("", status.pending_reason)
            if self.reason:  # said when it changes, not on every poll (nor as its time left runs down)
                yield FollowEvent("progress", f"job {status.id} waits: {status.pending_reason}", status)
        for text in _host_changes(self.hosts, status):
            yield FollowEvent("progress", text, status)
        self.hosts = {h.index: h for h in status.hosts}
