"""Read ModelArts task logs by offset, each byte once: the whole log's link first, the preview as a fallback.

For each task :class:`TaskLogReader` asks ``.../logs/url`` for a temporary link to the whole log (valid 5
minutes; asked again after :data:`LINK_SECONDS` or when the link is refused) and reads only the new bytes
with ``Range: bytes=<offset>-``. When the platform gives no link, or the link cannot be read, it reads the
log preview (the last 5 MB and the full size) and keeps its offset; bytes the preview skipped are reported
in one line that says where the whole log is: the job's ``log_export_path`` in OBS, else ``ma-submit logs``
once the job ended. The offsets themselves live in :class:`~.tasklog.TaskLog`.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import requests
from malaunch.entrypoint.public import RankProgress, newest_attempt

from ...errors import BackendError, ConfigError
from ...status import JobState, JobStatus
from .._http import RetryPolicy
from ..logprogress import LOG_TAIL_BYTES, HostTail, log_progress, tail_lines, with_log_progress
from .api import ModelArtsClient
from .inside import task_names
from .phases import task_index
from .tasklog import TaskLog

__all__ = ["LINK_SECONDS", "TaskLogReader", "TaskTails", "full_log_place", "task_tail"]

#: A log link is asked again after this many seconds (the platform's links are valid for 5 minutes).
LINK_SECONDS = 240.0


def full_log_place(job: Mapping[str, Any]) -> str:
    """Where the whole log of ``job`` can be read: its OBS log folder, else the platform's log link."""
    export = ((job.get("spec") or {}).get("log_export_path") or {}).get("obs_url")
    if export:
        text = str(export)
        return text if text.startswith("obs://") else "obs:/" + text if text.startswith("/") else text
    return "the link 'GET .../tasks/<task>/logs/url' of the ModelArts API gives (the console's log download)"


class TaskLogReader:
    """The log reading of one ``logs`` call (see the module docstring)."""

    def __init__(
        self,
        client: ModelArtsClient,
        session: requests.Session,
        policy: RetryPolicy,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.session = session
        self.policy = policy
        self.clock = clock
        self.logs: Dict[str, TaskLog] = {}
        self.links: Dict[str, Tuple[str, float]] = {}
        self.no_links = False  # the platform gave no link once: previews from then on

    def _link(self, job_id: str, task: str) -> Optional[str]:
        if self.no_links:
            return None
        known = self.links.get(task)
        if known is not None and self.clock() - known[1] < LINK_SECONDS:
            return known[0]
        url = self.client.log_url(job_id, task)
        if url is None:
            self.no_links = True
            return None
        self.links[task] = (url, self.clock())
        return url

    def _ranged(self, url: str, log: TaskLog) -> Optional[List[str]]:
        """The new lines through the link, or None when the link did not work (then the preview is used)."""
        try:
            answer = self.session.get(url, headers={"Range": f"bytes={log.offset}-"}, timeout=self.policy.timeout)
        except requests.RequestException:
            return None
        if answer.status_code == 416:
            return []
        if answer.status_code == 206:
            return log.feed(answer.content, log.offset)
        if answer.status_code == 200:
            return log.feed(answer.content, 0)
        return None

    def read(self, job: Mapping[str, Any], task: str, index: int) -> List[str]:
        """New lines of ``task`` since the last call (plus a notice for bytes the preview skipped)."""
        job_id = str((job.get("metadata") or {}).get("id") or "")
        log = self.logs.setdefault(task, TaskLog(index))
        url = self._link(job_id, task)
        if url is not None:
            lines = self._ranged(url, log)
            if lines is not None:
                return lines
            self.links.pop(task, None)  # expired or refused: a new link next time, the preview now
        preview = self.client.log_preview(job_id, task)  # a BackendError (no log yet) goes to the caller
        lines, _skipped = log.feed_preview(preview.content, preview.full_size, task, full_log_place(job))
        return lines

    def flush(self) -> Iterator[str]:
        """The last unfinished line of every task (at the end)."""
        for log in self.logs.values():
            last = log.flush()
            if last is not None:
                yield last


def task_tail(client: ModelArtsClient, session: requests.Session, policy: RetryPolicy, job_id: str, task: str,
              size: int) -> Optional[bytes]:  # fmt: skip
    """The last ``size`` bytes (about) of one task's log, or None when it cannot be read: through the whole log's
    link with a suffix ``Range`` (only those bytes travel), else the platform's preview (its last 5 MB)."""
    url = client.log_url(job_id, task)
    if url is not None:
        try:
            with session.get(url, headers={"Range": f"bytes=-{size}"}, timeout=policy.timeout, stream=True) as answer:
                if answer.status_code == 206:
                    return answer.content
                if answer.status_code == 416:  # an empty log
                    return b""
        except requests.RequestException:
            pass  # the preview says the same, in more bytes
    try:
        preview = client.log_preview(job_id, task)
    except (BackendError, ConfigError):  # no log yet, or the API refused: this host's lines are not known
        return None
    return preview.content[-size:]


class TaskTails:
    """What ``status`` and ``top`` read of a running job's task logs through ``api()``: the progress and recovery
    lines its shims wrote (:mod:`..logprogress`), one tail read per task (:func:`task_tail`)."""

    def __init__(self, api: Callable[[], ModelArtsClient], session: requests.Session, policy: RetryPolicy) -> None:
        self._api, self.session, self.policy = api, session, policy

    def of(self, job: Mapping[str, Any]) -> List[HostTail]:
        """The last lines of each task's log that can be read, by host index."""
        job_id = str((job.get("metadata") or {}).get("id") or "")
        tails: List[HostTail] = []
        for position, task in enumerate(task_names(job)):
            data = task_tail(self._api(), self.session, self.policy, job_id, task, LOG_TAIL_BYTES)
            if data is not None:
                tails.append((task_index(task, position), tail_lines(data)))
        return tails

    def added(self, status: JobStatus, job: Mapping[str, Any]) -> JobStatus:
        """``status`` with the job's progress and time to recover (unchanged while the job has not started)."""
        return status if status.state is JobState.PENDING else with_log_progress(status, self.of(job))

    def ranks(self, job: Mapping[str, Any]) -> Tuple[RankProgress, ...]:
        """Each rank's last record of the newest attempt, every task's (``top``)."""
        return tuple(newest_attempt(log_progress(self.of(job))[0]))
