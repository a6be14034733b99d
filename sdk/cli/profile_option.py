"""``--profile NAME`` on every verb that submits or asks a backend, and how those verbs use the profile.

The option only remembers the name in the click context (verbs keep their signatures); :func:`open_for` makes a
backend as ``ma-submit`` makes it, with the profile's connection settings (a Volcano context, the ModelArts
credentials through ``$MALAUNCH_PROFILE``), and :func:`job_for` reads a job file with the profile's values filled
in (:func:`sweep_for`: a sweep's). The profile in use is the one named, else ``$MALAUNCH_PROFILE``, else
``default`` when it exists (:mod:`malaunch.sdk.profiles`); what does not need click is in :mod:`.profile_use`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, Optional, Tuple

import click

from ..errors import SpecError
from ..job import Job
from ..profiles.apply import blame_profile, fill_job_data, load_job, render_origins
from ..spec.loader import read_job_data
from ..sweep.api import Sweep
from .profile_use import backend_of_profile, open_with, selected_profile

if TYPE_CHECKING:
    from ..backends.base import Backend

__all__ = ["chosen_profile", "job_for", "open_for", "profile_backend", "profile_option", "sweep_for"]

_META = "malaunch.profile"


def _remember(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[str]:
    del param
    if value is not None:
        ctx.meta[_META] = value
    return value


def profile_option(function: Any) -> Any:
    """The ``--profile NAME`` option (its value is kept for :func:`chosen_profile`, not passed to the verb)."""
    return click.option(
        "--profile",
        metavar="NAME",
        expose_value=False,
        callback=_remember,
        help="Use this profile ('ma-submit configure'). Default: $MALAUNCH_PROFILE, else the profile 'default'.",
    )(function)


def chosen_profile() -> Optional[str]:
    """The ``--profile`` given to the running verb, or None."""
    ctx = click.get_current_context(silent=True)
    value = ctx.meta.get(_META) if ctx is not None else None
    return value if isinstance(value, str) else None


def open_for(name: str) -> Backend:
    """Backend ``name`` as ``ma-submit`` makes it, configured by the profile in use (:func:`.profile_use.open_with`)."""
    return open_with(name, chosen_profile())


def profile_backend() -> str:
    """The backend of the verbs without a JOB_ID (list, prune) when none is named: the profile's, else the default."""
    return backend_of_profile(chosen_profile())


def job_for(job_file: str, backend: Optional[str], run_method: Optional[str]) -> Tuple[Job, Optional[str]]:
    """The job of ``job_file`` with the command line's ``backend`` and ``run_method``, the profile in use filling
    what the job file leaves out; and the block ``--dry-run`` prints about where the values came from (None
    when no profile is in use)."""
    profile = selected_profile(chosen_profile())
    if profile is None:
        return Job.from_yaml(job_file, run_method=run_method, backend=backend), None
    spec, rows = load_job(job_file, profile, backend, os.environ)
    return Job(spec).with_options(run_method=run_method, backend=backend), render_origins(profile, rows)


def sweep_for(job_file: str, overrides: Mapping[str, Any]) -> Tuple[Sweep, Optional[str]]:
    """As :func:`job_for`, for a sweep's job file (its ``sweep:`` section is the sweep's own, never filled)."""
    profile = selected_profile(chosen_profile())
    raw, base_dir = read_job_data(job_file) if profile is not None else (None, "")
    if profile is None or not isinstance(raw, dict):
        return Sweep.from_yaml(job_file, **overrides), None
    data, rows = fill_job_data(raw, profile, None, os.environ)
    try:
        return Sweep.from_data(data, base_dir, **overrides), render_origins(profile, rows)
    except SpecError as error:
        raise (blame_profile(error, profile, rows) or error.with_source(job_file)) from None
