"""What ``ma-submit checkpoints JOB_ID`` shows, whatever the backend: the job's checkpoint folder and its rows.

Each row is the shim's own reading of the folder (:func:`malaunch.entrypoint.public.list_checkpoints`), so a
backend that can see the folder lists it as the shim sees it between attempts (docs/recovery.md#checkpoints).
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Tuple

from malaunch.entrypoint.public import CheckpointRow

__all__ = ["CheckpointListing", "state_text"]


class CheckpointListing(NamedTuple):
    """The checkpoints of job ``job_id``: its folder (``where``; empty when the job has none), whether the job still
    runs (a folder newer than every complete one may then still be written), its ``rows`` oldest first, and a
    ``note`` when the folder is missing or empty (why, and what to do)."""

    job_id: str
    where: str
    running: bool
    rows: Tuple[CheckpointRow, ...]
    note: str = ""

    def to_json(self) -> Dict[str, Any]:
        return {"id": self.job_id, "folder": self.where, "running": self.running, "note": self.note,
                "checkpoints": [row.to_json() for row in self.rows]}  # fmt: skip


def state_text(row: CheckpointRow) -> str:
    """A row's state as ``ma-submit checkpoints`` and the job page say it: ``complete``, else the state and why."""
    return row.state if row.complete else f"{row.state}: {row.why}"
