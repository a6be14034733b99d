"""``resume_from``: start a job from another job's checkpoint (``JOB_ID`` or ``JOB_ID:NAME``; issue 39).

The job file's ``resume_from``, ``Job(resume_from=...)`` and ``ma-submit --resume-from`` all hold the same text:
the id of an ended job of the same backend (a unique prefix is enough until the backend resolves it) and,
optionally, after one ``:``, the name of one of its checkpoints (without it, its newest complete one is meant).
Checking the text is pure (:func:`parse_resume`); whether the job has ended and the checkpoint is complete is the
backend's to check when it submits (:meth:`~malaunch.sdk.backends.Backend.resume_check`), and the shim's at start
(``MALAUNCH_RESUME_SOURCE``).

A backend whose check finds where the checkpoints are (ModelArts: the old job's OBS folder, from its details) hands
the plan that place in the resolved text itself: ``JOB_ID[:NAME]@obs://bucket/folder/`` (:attr:`ResumeRef.location`),
so the plan stays a pure function of the spec. A location in a job file is replaced by that check, and ignored by
a backend that needs none (local, Volcano: the folder follows from the id).
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional

from .checks import fail

__all__ = ["ResumeRef", "parse_resume", "require_resolved"]

_FIELD = "resume_from"
_LOCATION = re.compile(r"@(?=[a-z][a-z0-9+.-]*://)")  # where JOB_ID[:NAME] ends and a resolved location starts


class ResumeRef(NamedTuple):
    """Another job's checkpoint: the job's id, one checkpoint's name (None: its newest complete one) and, once a
    backend's check found it, where that job's checkpoints are (a URL; None where the id says it)."""

    job_id: str
    name: Optional[str] = None
    location: Optional[str] = None

    def text(self) -> str:
        """The form the job file and ``--resume-from`` take (``JOB_ID`` or ``JOB_ID:NAME``), with ``@LOCATION`` once
        resolved."""
        ref = self.job_id if self.name is None else f"{self.job_id}:{self.name}"
        return ref if self.location is None else f"{ref}@{self.location}"


def parse_resume(value: object) -> ResumeRef:
    """``value`` (``JOB_ID`` or ``JOB_ID:NAME``) as a :class:`ResumeRef`.

    Raises:
        SpecError: not such a text (field ``resume_from``).
    """
    if not isinstance(value, str):
        raise fail(_FIELD, "must be a string, JOB_ID or JOB_ID:NAME", value)
    at = _LOCATION.search(value)
    location = value[at.end() :] if at else None
    job_id, colon, name = (value[: at.start()] if at else value).partition(":")
    if not job_id.strip() or job_id != job_id.strip() or any(char.isspace() or char == "\x00" for char in job_id):
        raise fail(_FIELD, "must start with a job id (JOB_ID or JOB_ID:NAME, no spaces)", value,
                   "give the id of an ended job, as 'ma-submit list' shows it")  # fmt: skip
    if location is not None and any(char.isspace() or char == "\x00" for char in location):
        raise fail(_FIELD, "must give its location as a URL without spaces after '@'", value)
    if not colon:
        return ResumeRef(job_id, None, location)
    if not name or name.startswith(".") or "/" in name or "\x00" in name or name != name.strip():
        raise fail(_FIELD, "must name one checkpoint after ':' (a folder name, not a path, not starting with '.')",
                   value, "'ma-submit checkpoints JOB_ID' lists the names; JOB_ID alone means the newest")
    return ResumeRef(job_id, name, location)


def require_resolved(resume_from: Optional[str], unresolved: str) -> None:
    """Refuse a ``resume_from`` that a dry run left unresolved (its place still a backend's ``unresolved``
    placeholder): such a plan is never sent.

    Raises:
        SpecError: it is (field ``resume_from``).
    """
    if resume_from is not None and parse_resume(resume_from).location == unresolved:
        raise fail(_FIELD, "is a dry run's, not resolved", resume_from,
                   "submit the job (ma-submit, Job.submit): it resolves resume_from first")  # fmt: skip
