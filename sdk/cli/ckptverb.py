"""``ma-submit checkpoints JOB_ID``: the checkpoints of a job, one row each: its name, its step where known, how
long ago it was saved, its size, and whether it is complete (and why not), as the job's shim reads its folder
(:meth:`~malaunch.sdk.backends.Backend.checkpoints`; docs/recovery.md#checkpoints).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional

import click

from ..backends.checkpoints import state_text
from ..units import size_text
from .actions import format_age
from .echo import echo, echo_json, note
from .jobs import backend_option, resolved
from .output import OUTPUT

if TYPE_CHECKING:
    from ..backends.checkpoints import CheckpointListing

__all__ = ["checkpoints_cmd", "render_checkpoints"]


def render_checkpoints(listing: CheckpointListing, now: float) -> str:
    """The table of ``ma-submit checkpoints``: header, then one row per checkpoint, oldest first (empty: no rows)."""
    if not listing.rows:
        return ""
    rows = [("NAME", "STEP", "AGE", "SIZE", "STATE")]
    for row in listing.rows:
        state = state_text(row)
        step = "-" if row.step is None else str(row.step)
        rows.append((row.name, step, format_age(now - row.time), size_text(row.size), state))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths)) + "  " + row[4]
                     for row in rows)  # fmt: skip


@click.command("checkpoints")
@backend_option
@click.option("--output", type=OUTPUT, default="text", show_default=True, help="json: machine-readable.")
@click.argument("job_id")
def checkpoints_cmd(backend: Optional[str], output: str, job_id: str) -> int:
    """List the checkpoints of JOB_ID: step, age, size, and whether each is complete (and why not).

    A checkpoint is complete once its folder holds .complete, written last; one with no marker, a damaged marker,
    one still being written (the job runs), or one whose parts have not all reached OBS is never resumed from.
    Start a new job from one of them with 'ma-submit --resume-from JOB_ID[:NAME] job.yaml'.
    """
    impl, ident = resolved(backend, job_id)
    found = impl.checkpoints(ident)
    if output == "json":
        echo_json(found.to_json())
        return 0
    table = render_checkpoints(found, time.time())
    if table:
        echo(table)
    note(found.note if found.note else f"job {found.job_id}: checkpoints in {found.where}")
    return 0
