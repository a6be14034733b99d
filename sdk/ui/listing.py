"""The jobs page's rows: the jobs of every backend shown, filtered and paged through each backend's own
``list_page`` (the local backend answers from its history index, so 10,000 ended jobs cost what ten do).

A page at ``offset`` of ``size`` asks each backend for its newest ``offset + size`` matching jobs, merges them by
creation time and keeps its slice; how many more match comes from each backend's count. A backend that cannot be
opened or does not answer (a broken profile, a cloud that cannot be reached) gives its error line in
:attr:`Listing.errors` and the others still list. Only the rows of the page are read further: their hosts (a
status each; an ended job's is kept, it no longer changes), and their restarts where the platform does not count
them: from the job's events, counted in the background (an ended job's count is kept; a row shows it from the
next page on, and ``-`` until then).
"""

from __future__ import annotations

import concurrent.futures
import time
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Set, Tuple

from ..backends.base import Backend
from ..backends.listing import ListPage, ListQuery
from ..backends.registry import runs_here
from ..errors import MalaunchError
from ..status import JobStatus
from .timeline import restarts_in

__all__ = ["ANSWER_WITHIN", "Lister", "Listing", "Row", "Sources", "count_restarts", "list_jobs"]

#: Seconds a backend's list may take before the page shows it as not answering (it is asked again next time).
ANSWER_WITHIN = 8.0

#: Ended jobs whose whole status (hosts included) is kept between pages.
_KEEP_ENDED = 5000

#: Backend name -> how to open it (raises MalaunchError when it cannot be).
Sources = Mapping[str, Callable[[], Backend]]


class Row(NamedTuple):
    """One job of the page: its backend's name, its status, how many hosts and restarts (None: not known)."""

    backend: str
    status: JobStatus
    hosts: Optional[int]
    restarts: Optional[int]


class Listing(NamedTuple):
    """The page's rows, how many matching jobs come after them, and each failing backend's error line."""

    rows: Tuple[Row, ...]
    more: int
    errors: Tuple[Tuple[str, str], ...]
    notes: Tuple[str, ...] = ()


def _row(backend: Backend, status: JobStatus) -> Tuple[JobStatus, Optional[int]]:
    """The status with its hosts (a listing from an index may carry none) and the platform's restart count."""
    if status.hosts:
        return status, status.platform_restarts
    try:
        full = backend.status(status.id)
    except MalaunchError:
        return status, status.platform_restarts
    return full, full.platform_restarts


class _Asked(NamedTuple):
    backend: Backend
    page: ListPage


def _ask(opener: Callable[[], Backend], query: ListQuery, now: float) -> _Asked:
    backend = opener()
    return _Asked(backend, backend.list_page(query, now=now))


def count_restarts(backend: Backend, status: JobStatus) -> Optional[int]:
    """How many times the job was restarted: the platform's count, else the restarts its events record (None:
    neither can be read)."""
    if status.platform_restarts is not None:
        return status.platform_restarts
    try:
        return len(restarts_in(backend.events(status.id)))
    except MalaunchError:
        return None


class Lister:
    """Lists through a small pool, so that a slow backend costs the page at most :data:`ANSWER_WITHIN` seconds;
    a backend still busy from the page before is not asked twice."""

    def __init__(self, within: float = ANSWER_WITHIN) -> None:
        self.within = within
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="list")
        self._busy: Dict[str, concurrent.futures.Future[_Asked]] = {}
        self._restarts: Dict[Tuple[str, str], int] = {}  # (backend, job id) -> restarts of an ended job
        self._ended: Dict[Tuple[str, str], JobStatus] = {}  # (backend, job id) -> an ended job's whole status
        self._counting: Set[Tuple[str, str]] = set()

    def close(self) -> None:
        """Let the pool's threads end (a backend still answering finishes in the background)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def list_jobs(self, sources: Sources, query: ListQuery, offset: int, size: int) -> Listing:
        """The page of jobs at ``offset`` of ``size`` (see the module docstring)."""
        now = time.time()
        wide = query._replace(limit=offset + size)
        futures: Dict[str, concurrent.futures.Future[_Asked]] = {}
        for name, opener in sources.items():
            if runs_here(name):  # on this machine and fast: asked here, so the bench measures the page's own work
                futures[name] = concurrent.futures.Future()
                try:
                    futures[name].set_result(_ask(opener, wide, now))
                except MalaunchError as error:
                    futures[name].set_exception(error)
                continue
            busy = self._busy.get(name)
            futures[name] = busy if busy is not None and not busy.done() else self._pool.submit(_ask, opener, wide, now)
            self._busy[name] = futures[name]
        done, _ = concurrent.futures.wait(futures.values(), timeout=self.within)
        errors: List[Tuple[str, str]] = []
        notes: List[str] = []
        found: List[Tuple[str, Backend, JobStatus]] = []
        more = 0
        for name, future in futures.items():
            if future not in done:
                errors.append((name, f"no answer within {self.within:g} s; the page shows its jobs once it answers"))
                continue
            try:
                asked = future.result()
            except MalaunchError as error:
                errors.append((name, str(error)))
                continue
            more += asked.page.more
            notes.extend(f"{name}: {text}" for text in asked.page.notes)
            found.extend((name, asked.backend, status) for status in asked.page.statuses)
        found.sort(key=lambda item: (item[2].created_at or 0.0, item[2].id), reverse=True)
        page = found[offset : offset + size]
        more += max(len(found) - offset - len(page), 0)
        rows = tuple(self._with_restarts(name, backend, status) for name, backend, status in page)
        return Listing(rows, more, tuple(errors), tuple(notes))

    def _with_restarts(self, name: str, backend: Backend, status: JobStatus) -> Row:
        kept = self._ended.get((name, status.id)) if status.is_terminal else None
        full, restarts = (kept, kept.platform_restarts) if kept is not None else _row(backend, status)
        if full.is_terminal and kept is None:  # an ended job's status never changes: read once
            if len(self._ended) >= _KEEP_ENDED:
                self._ended.clear()
            self._ended[(name, full.id)] = full
        if restarts is None:
            key = (name, full.id)
            restarts = self._restarts.get(key)
            if restarts is None and key not in self._counting:
                self._counting.add(key)
                self._pool.submit(self._count, key, backend, full)
        return Row(name, full, len(full.hosts) or None, restarts)

    def _count(self, key: Tuple[str, str], backend: Backend, status: JobStatus) -> None:
        try:
            counted = count_restarts(backend, status)
        finally:
            self._counting.discard(key)
        if counted is not None and status.is_terminal:  # an ended job's count never changes
            self._restarts[key] = counted


def list_jobs(sources: Sources, query: ListQuery, offset: int, size: int) -> Listing:
    """One listing with a pool of its own (tests, the bench)."""
    lister = Lister()
    try:
        return lister.list_jobs(sources, query, offset, size)
    finally:
        lister.close()
