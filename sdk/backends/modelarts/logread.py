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

from .._http import RetryPolicy
from .api import ModelArtsClient
from .tasklog import TaskLog

__all__ = ["LINK_SECONDS", "TaskLogReader", "full_log_place"]

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
        log = self.logs.setdefault(task, TaskLog(f"[host {index}] "))
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
