"""A small index of the jobs submitted from this machine: job id -> backend, so ``ma-submit status JOB_ID``
finds a cloud job without ``--backend``.

The index is one JSON file, ``$MALAUNCH_HOME/job-index.json`` (default ``~/.malaunch``), written atomically
(temporary file + rename) and read defensively: a missing or damaged file is an empty index, never an
error. It keeps the newest :data:`MAX_ENTRIES` jobs.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Mapping, Optional

from malaunch.entrypoint.atomicfile import write_atomic

__all__ = ["INDEX_FILE", "MAX_ENTRIES", "JobIndex"]

INDEX_FILE = "job-index.json"
MAX_ENTRIES = 2000


class JobIndex:
    """Read and update the index file at ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def default(cls, environ: Mapping[str, str]) -> JobIndex:
        """The index under ``$MALAUNCH_HOME`` (default ``~/.malaunch``)."""
        home = environ.get("MALAUNCH_HOME") or os.path.join("~", ".malaunch")
        return cls(os.path.join(os.path.abspath(os.path.expanduser(home)), INDEX_FILE))

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
        """The backend a job id was submitted to from here, or None."""
        entry = self.entries().get(job_id)
        return None if entry is None else str(entry["backend"])

    def record(self, job_id: str, backend: str, **details: Any) -> None:
        """Add or replace ``job_id``; keeps the newest :data:`MAX_ENTRIES`."""
        jobs = self.entries()
        jobs.pop(job_id, None)
        jobs[job_id] = {"backend": backend, **details}
        if len(jobs) > MAX_ENTRIES:
            jobs = dict(list(jobs.items())[-MAX_ENTRIES:])
        text = json.dumps({"version": 1, "jobs": jobs}, indent=1)
        write_atomic(self.path, text, mode=0o600, durable=True, prefix=".job-index.")
