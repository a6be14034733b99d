"""Removing ended local jobs: ``delete``, ``prune`` and ``keep_for``, and what keeps a job from going.

A job is *in use* while a process reads it: ``ma-submit logs`` (with or without ``-f``) and
``JobHandle.logs()`` hold a shared ``flock`` on the job's ``.use.lock`` for as long as they read
(:func:`reading`). Removing a job takes that lock alone without waiting; a job in use is kept, and so is a
job that any live process still carries in its environment (``MALAUNCH_JOB_ID``, e.g. a straggler of
``exec``). Running jobs are never candidates. A removal first renames the folder out of the listing
(``<home>/.removing-<id>-<pid>``), then deletes it, so readers see the job whole or not at all.

Prunes (and ``keep_for``) hold ``<home>/prune.lock`` while they choose and remove, so two at once never
race: the second one chooses after the first is done; ``keep_for`` is skipped when a prune is under way.
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import TYPE_CHECKING, AbstractSet, Iterator, List, Optional, Sequence, Set, Tuple

from malaunch.entrypoint.public import env_values

from ...errors import JobNotFound
from ...home import file_lock
from ..base import PruneResult
from .history import History
from .hostnet import tear_down_recorded
from .jobdir import JOB_ID_VARIABLE, JobPaths, request_json

if TYPE_CHECKING:  # the history index and shutil are loaded only by what removes or lists, not by reading a job

    from .history import Reader, Snapshot

__all__ = [
    "IN_USE",
    "busy_job_ids",
    "disk_usage",
    "expire_due",
    "prune_home",
    "prune_lock",
    "reading",
    "remove_job",
    "remove_jobs",
    "sweep_leftovers",
]

#: Why a job in use was kept.
IN_USE = "another process is reading it (ma-submit logs); try again when it is done"
_PRUNE_LOCK = "prune.lock"
_REMOVING = ".removing-"


_GONE = (errno.ENOENT, errno.ENOTDIR)  # the lock file's folder, the job's, was removed


@contextlib.contextmanager
def reading(paths: JobPaths) -> Iterator[None]:
    """Hold the job's use lock shared while reading it; ``JobNotFound`` when it was removed meanwhile."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(file_lock(paths.use_lock, shared=True))
        except OSError as exc:
            if exc.errno in _GONE:
                raise JobNotFound(paths.job_id, "local", "it was deleted (ma-submit prune or delete)") from None
            raise
        if not os.path.isdir(paths.job_dir):
            raise JobNotFound(paths.job_id, "local", "it was deleted (ma-submit prune or delete)")
        yield


@contextlib.contextmanager
def prune_lock(home: str, *, wait: bool = True) -> Iterator[bool]:
    """Hold the home's prune lock; yields False (holding nothing) when ``wait`` is False and it is taken."""
    os.makedirs(home, exist_ok=True)
    with file_lock(os.path.join(home, _PRUNE_LOCK), wait=wait) as held:
        yield held


def disk_usage(path: str) -> int:
    """Bytes the files under ``path`` take on disk (allocated blocks; links not followed)."""
    total = 0
    stack = [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as found:
                for entry in found:
                    with contextlib.suppress(OSError):
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
        except OSError:
            continue
    return total


def busy_job_ids() -> Set[str]:
    """The job ids that live processes of this user carry in ``MALAUNCH_JOB_ID`` (one pass over /proc)."""
    return env_values(JOB_ID_VARIABLE)


def remove_job(paths: JobPaths) -> bool:
    """Remove the job's folder unless it is in use (then False); raises ``OSError`` when it cannot be removed."""
    with contextlib.ExitStack() as stack:
        try:
            held = stack.enter_context(file_lock(paths.use_lock, wait=False))
        except OSError as exc:
            if exc.errno in _GONE:
                return True  # removed by someone else meanwhile
            raise
        if not held:
            return False
        aside = os.path.join(paths.home, f"{_REMOVING}{paths.job_id}-{os.getpid()}")
        try:
            os.rename(paths.job_dir, aside)
        except FileNotFoundError:
            return True
        import shutil

        shutil.rmtree(aside)
        return True


def sweep_leftovers(home: str) -> None:
    """Delete what an interrupted removal left aside (call it holding the prune lock)."""
    import shutil

    with contextlib.suppress(OSError), os.scandir(home) as found:
        for entry in found:
            if entry.name.startswith(_REMOVING):
                shutil.rmtree(entry.path, ignore_errors=True)


def remove_jobs(
    home: str, job_ids: Sequence[str], *, dry_run: bool, busy: Optional[Set[str]] = None, strict: bool = False
) -> Tuple[List[str], List[Tuple[str, str]], int]:
    """Remove the ended jobs ``job_ids`` but those in use or carried by live processes (``busy``; None: looked
    up); returns the removed (with ``dry_run``: would be), the kept with why, and the bytes freed. A folder
    that cannot be removed is kept with why, or with ``strict`` raises ``OSError``. Call it holding the prune
    lock. The history index forgets what went."""
    busy = busy_job_ids() if busy is None else busy
    deleted: List[str] = []
    kept: List[Tuple[str, str]] = []
    freed = 0
    for job_id in job_ids:
        paths = JobPaths(home, job_id)
        if job_id in busy:
            kept.append((job_id, "live processes still carry its id (MALAUNCH_JOB_ID); stop them first"))
            continue
        size = disk_usage(paths.job_dir)
        if not dry_run:  # its namespaces too: the folder is their only record (a job killed whole left them)
            tear_down_recorded(request_json(paths))
        try:
            if not dry_run and not remove_job(paths):
                kept.append((job_id, IN_USE))
                continue
        except OSError as exc:
            if strict:
                raise
            kept.append((job_id, f"cannot delete {paths.job_dir}: {exc.strerror or exc}; check its permissions"))
            continue
        deleted.append(job_id)
        freed += size
    if deleted and not dry_run:
        History(home).forget(deleted)
    return deleted, kept, freed


def expire_due(home: str, snap: Snapshot, now: float) -> Set[str]:
    """Remove the ended jobs of ``snap`` whose ``keep_for`` has passed; nothing while a prune runs. Their ids."""
    if snap.next_due is None or now < snap.next_due:
        return set()
    due = sorted(row.id for row in snap.rows() if row.due(now))
    if not due:
        return set()
    with prune_lock(home, wait=False) as held:
        return set(remove_jobs(home, due, dry_run=False)[0]) if held else set()


def prune_home(
    home: str,
    read: Reader,
    older_than: float,
    *,
    now: float,
    states: AbstractSet[str] = frozenset(),
    keep: int = 0,
    dry_run: bool = False,
) -> PruneResult:
    """The local ``prune`` (see :meth:`malaunch.sdk.backends.base.Backend.prune`), under the prune lock: the
    second of two prunes chooses from what the first left."""
    with prune_lock(home):
        sweep_leftovers(home)
        history = History(home)
        snap = history.snapshot(read)
        kept = [] if states else [
            (s.id, f"its state is unknown ({s.message}); delete it by id")
            for s in snap.live.values() if s.state.value == "UNKNOWN"
        ]  # fmt: skip
        rows = [row for row in snap.rows() if not states or row.state in states]  # newest first
        chosen = [r.id for r in rows[keep:] if now - (r.ended_at or r.created_at or 0.0) >= older_than]
        deleted, refused, freed = remove_jobs(home, chosen, dry_run=dry_run)
        history.settle(snap)
    return PruneResult(tuple(deleted), tuple(kept + refused), freed, dry_run, tuple(snap.notes))
