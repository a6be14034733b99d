"""What ``ma-submit list`` asks a backend for: a filter and a page size (:class:`ListQuery`), and what it gets
back (:class:`ListPage`): the newest matching jobs, how many more match, and notes for stderr.

:func:`page_of` filters and pages statuses a backend already has in memory (the cloud backends, which page
through the platform's own list as before); the local backend answers from its history index instead
(:mod:`malaunch.sdk.backends.local.history`) so that a home with many ended jobs is not read job by job.
"""

from __future__ import annotations

import fnmatch
from typing import FrozenSet, Iterable, NamedTuple, Optional, Tuple

from ..status import JobStatus

__all__ = ["DEFAULT_LIMIT", "ListPage", "ListQuery", "page_of"]

#: How many jobs ``ma-submit list`` shows unless told (``--limit``); 0 means all.
DEFAULT_LIMIT = 20


class ListQuery(NamedTuple):
    """Which jobs to list: states (JobState values, empty: any), a name glob, an age window, a page size."""

    states: FrozenSet[str] = frozenset()
    name: Optional[str] = None  # a glob on the job file's name (``train-*``)
    since: Optional[float] = None  # created at most this many seconds ago
    older_than: Optional[float] = None  # created more than this many seconds ago
    limit: int = DEFAULT_LIMIT  # 0: no limit

    def matches(self, state: str, name: Optional[str], created_at: Optional[float], now: float) -> bool:
        """Whether a job with these fields passes every filter (an unknown creation time passes the age ones)."""
        if self.states and state not in self.states:
            return False
        if self.name is not None and not fnmatch.fnmatchcase(name or "", self.name):
            return False
        if created_at is not None:
            age = now - created_at
            if self.since is not None and age > self.since:
                return False
            if self.older_than is not None and age <= self.older_than:
                return False
        return True

    def cut(self, count: int) -> int:
        """How many of ``count`` matching jobs the page holds."""
        return count if self.limit <= 0 else min(count, self.limit)


class ListPage(NamedTuple):
    """The newest matching jobs (newest first), how many more matched, and notes to print on stderr."""

    statuses: Tuple[JobStatus, ...]
    more: int = 0
    notes: Tuple[str, ...] = ()


def page_of(statuses: Iterable[JobStatus], query: ListQuery, now: float) -> ListPage:
    """Filter ``statuses`` with ``query``, newest first, cut to its limit."""
    found = [s for s in statuses if query.matches(s.state.value, s.name, s.created_at, now)]
    found.sort(key=lambda s: (s.created_at or 0.0, s.id), reverse=True)
    shown = query.cut(len(found))
    return ListPage(tuple(found[:shown]), len(found) - shown)
