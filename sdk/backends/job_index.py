"""A small index of the jobs submitted from this machine: job id -> backend, so ``ma-submit status JOB_ID``
finds a cloud job without ``--backend``.

The index is one JSON file, ``$MALAUNCH_HOME/job-index.json`` (default ``~/.malaunch``), written atomically
(temporary file + rename) and read defensively: a missing or damaged file is an empty index, never an
error. It keeps the newest :data:`MAX_ENTRIES` jobs.

:meth:`JobIndex.record` (and :meth:`JobIndex.forget`, for a deleted job) reads, changes and writes the file
while it holds an exclusive lock (:func:`malaunch.sdk.home.file_lock`) on ``job-index.json.lock`` beside it, so
submits running at the same
time (``ma-submit --detach`` in a loop) each add their job and none is lost. Readers take no lock: the rename
makes every read see a whole file.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple

from ..home import file_lock, home_dir, one_by_prefix, write_json_atomic

__all__ = ["INDEX_FILE", "LOCK_SUFFIX", "MAX_ENTRIES", "JobIndex"]

INDEX_FILE = "job-index.json"
LOCK_SUFFIX = ".lock"
MAX_ENTRIES = 2000


class JobIndex:
    """Read and update the index file at ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def default(cls, environ: Mapping[str, str], home: Optional[str] = None) -> JobIndex:
        """The index under ``home``, else ``$MALAUNCH_HOME`` (default ``~/.malaunch``)."""
        return cls(os.path.join(home_dir(environ, home), INDEX_FILE))

    def entries(self) -> Dict[str, Dict[str, Any]]:
        """job id -> ``{"backend": ..., ...}``; empty when the file is missing or damaged."""
        try:
            with open(self.path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return {}
        jobs = data.get("jobs") if isinstance(data, dict) else None
        if not isinstance(jobs, dict):
            return {}
        return {
            str(key): dict(value)
            for key, value in jobs.items()
            if isinstance(value, dict) and isinstance(value.get("backend"), str)
        }

    def backend_of(self, job_id: str) -> Optional[str]:
        """The backend a job id was submitted to from here (also by a platform's own id), or None."""
        entries = self.entries()
        entry = entries.get(job_id)
        if entry is None:
            entry = next((e for e in entries.values() if e.get("platform_id") == job_id), None)
        return None if entry is None else str(entry["backend"])

    def by_prefix(self, prefix: str, backend: Optional[str] = None) -> Optional[Tuple[str, str]]:
        """``(job id, backend)`` of the one recorded job (of ``backend``, when given) whose id starts with
        ``prefix``; None when none does. Raises ``ConfigError`` when several do."""
        entries = {key: str(entry["backend"]) for key, entry in self.entries().items()}
        if backend is not None:
            entries = {key: name for key, name in entries.items() if name == backend}
        found = one_by_prefix(prefix, sorted(entries), "job") if prefix else None
        return None if found is None else (found, entries[found])

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the index's lock file (``<index>.lock``) exclusively; blocks until the other writer is done."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with file_lock(self.path + LOCK_SUFFIX):
            yield

    def record(self, job_id: str, backend: str, **details: Any) -> None:
        """Add or replace ``job_id`` under the lock (see the module docstring); keeps the newest MAX_ENTRIES."""
        with self._locked():
            jobs = self.entries()
            jobs.pop(job_id, None)
            jobs[job_id] = {"backend": backend, **details}
            if len(jobs) > MAX_ENTRIES:
                jobs = dict(list(jobs.items())[-MAX_ENTRIES:])
            self._write(jobs)

    def forget(self, job_id: str) -> None:
        """Remove ``job_id`` (a deleted job) under the lock; an id the index does not hold changes nothing."""
        with self._locked():
            jobs = self.entries()
            if jobs.pop(job_id, None) is not None:
                self._write(jobs)

    def _write(self, jobs: Dict[str, Dict[str, Any]]) -> None:
        write_json_atomic(self.path, {"version": 1, "jobs": jobs}, indent=1, sort_keys=False, prefix=".job-index.")
