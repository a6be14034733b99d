"""A local job's checkpoints: listed for ``ma-submit checkpoints``, and checked as the start of a new job
(``--resume-from``). The folder is ``<job dir>/checkpoints`` (:attr:`.jobdir.JobPaths.checkpoint_dir`); both read
it with the shim's own code (:mod:`malaunch.entrypoint.public`), which checks the source once more at start.
"""

from __future__ import annotations

import os
from typing import Optional

from malaunch.entrypoint.public import list_checkpoints, resume_point

from ...errors import SpecError
from ...spec.resume import ResumeRef
from ..checkpoints import CheckpointListing
from .jobdir import JobPaths
from .plan import source_folder

__all__ = ["listing", "resume_source"]

_FIELD = "resume_from"


def listing(home: str, job_id: str, running: bool) -> CheckpointListing:
    """The checkpoints of local job ``job_id`` (its whole id), with a note when it has none."""
    folder = JobPaths(home, job_id).checkpoint_dir
    rows = tuple(list_checkpoints(folder, running=running))
    note = ""
    if not os.path.isdir(folder):
        note = (f"job {job_id} has no checkpoint folder: its job file has no checkpoint: section (add one, and save "
                "with malaunch.entrypoint.checkpoint; docs/recovery.md#checkpoints)")  # fmt: skip
    elif not rows:
        note = f"job {job_id} saved no checkpoint in {folder}" + (" yet" if running else "")
    return CheckpointListing(job_id, folder, running, rows, note)


def resume_source(home: str, ref: ResumeRef, state: Optional[str]) -> ResumeRef:
    """Check that ``ref`` (its whole id) names a complete checkpoint of an ended local job; ``state``: the job's
    state when it has not ended (None: it has).

    Raises:
        SpecError: the job still runs, has no checkpoint folder, or ``ref`` names no complete checkpoint (exit 2).
    """
    text = ref.text()
    if state is not None:
        raise SpecError(_FIELD, f"job {ref.job_id} is {state}: a job starts from an ended job's checkpoint", text,
                        f"wait for it ('ma-submit wait {ref.job_id}') or stop it first")  # fmt: skip
    folder = JobPaths(home, ref.job_id).checkpoint_dir
    if not os.path.isdir(folder):
        raise SpecError(_FIELD, f"job {ref.job_id} has no checkpoint folder (its job file had no checkpoint: "
                        "section)", text, "name a job that saved checkpoints")  # fmt: skip
    found = resume_point(source_folder(home, ref), one=ref.name is not None)
    if isinstance(found, str):
        raise SpecError(_FIELD, f"nothing to resume from: {found}", text,
                        f"name a complete one ('ma-submit checkpoints {ref.job_id}' lists them)")  # fmt: skip
    return ref
