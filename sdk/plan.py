"""The submit plan: pure, frozen data saying exactly what a backend will submit.

Contract:

1. ``Backend.plan(spec, job_id=..., now=...)`` builds a :class:`SubmitPlan` without I/O, clock or randomness:
   the job id and the time are inputs, so the same inputs always give an equal plan.
2. ``--dry-run`` prints :meth:`SubmitPlan.render` (or :meth:`SubmitPlan.render_json`) and submits nothing;
   values of secret-looking variables are masked in both (``request.render()`` masks its own).
3. ``Backend.execute(plan)`` submits that very plan. Values only known at execution time (a free port) are
   shown as :data:`AUTO` in the plan and listed in the request; the backend records the final values with
   the job (the local backend writes ``plan.json`` into the job directory).
4. The job's secret (``MALAUNCH_JOB_SECRET``, which the hosts' shims sign their messages with) is made by
   ``execute`` (:func:`new_job_secret`), never by ``plan``: the plan holds :data:`SECRET` in its place, so a dry
   run, ``plan.json`` and every printed plan show the placeholder, never the value.
5. ``request`` is backend specific (the local backend's per-host commands and environments, a cloud
   backend's API body); it only has to satisfy :class:`PlanRequest`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Protocol, Tuple

from .redact import mask_data

if TYPE_CHECKING:
    from .spec.model import JobSpec  # a plan carries a spec made elsewhere: reading a job needs no spec checks

__all__ = ["AUTO", "SECRET", "PlanRequest", "SubmitPlan", "new_job_secret"]

#: Placeholder for a value chosen when the plan is executed (e.g. a free port).
AUTO = "<auto>"
#: Placeholder for the job's secret in a plan; ``execute`` puts the value of :func:`new_job_secret` in its place.
SECRET = "<secret>"


def new_job_secret() -> str:
    """A fresh per-job secret (64 hex digits); made at submit, handed to every host, never printed or stored
    where others can read it."""
    return os.urandom(32).hex()


class PlanRequest(Protocol):
    """What a backend-specific request must offer to be printed."""

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready data of the request."""
        ...

    def render(self) -> str:
        """Human-readable text of the request."""
        ...


@dataclass(frozen=True)
class SubmitPlan:
    """One job, ready to submit: the validated spec, its id and creation time, and the backend's request."""

    backend: str
    job_id: str
    created_at: float  # seconds since the epoch, passed in (never read from the clock while planning)
    spec: JobSpec
    request: PlanRequest
    notes: Tuple[str, ...] = ()

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready data: ``{"backend", "job_id", "created_at", "spec", "request", "notes"}``."""
        return {
            "backend": self.backend,
            "job_id": self.job_id,
            "created_at": self.created_at,
            "spec": self.spec.to_dict(),
            "request": self.request.to_json(),
            "notes": list(self.notes),
        }

    def render(self) -> str:
        """Text for ``--dry-run``: a header, the notes, then the backend's request."""
        spec = self.spec
        res = spec.resources
        lines = [
            f"job {self.job_id} (dry run: nothing was started)",
            f"  backend:     {self.backend}",
            f"  run_method:  {spec.run_method}",
            f"  resources:   {res.hosts} host(s) x {res.devices_per_host} device(s)",
            f"  code_dir:    {spec.code_dir}",
            f"  boot_file:   {spec.boot_file}",
        ]
        # one prefix a line: a warning is not also a note
        lines.extend(f"  {note}" if note.startswith("warning: ") else f"  note: {note}" for note in self.notes)
        lines.append(self.request.render())
        return "\n".join(lines)

    def render_json(self) -> str:
        """Pretty JSON of :meth:`to_json`, secret-looking values masked (:mod:`malaunch.sdk.redact`)."""
        return json.dumps(mask_data(self.to_json()), indent=2, sort_keys=False)
