"""``--profile NAME`` on every verb that submits or asks a backend, and how those verbs use the profile.

The option only remembers the name in the click context (verbs keep their signatures); :func:`open_for` makes a
backend as ``ma-submit`` makes it, with the profile's connection settings (a Volcano context, the ModelArts
credentials through ``$MALAUNCH_PROFILE``), and :func:`job_for` reads a job file with the profile's values filled
in. The profile in use is the one named, else ``$MALAUNCH_PROFILE``, else ``default`` when it exists
(:mod:`malaunch.sdk.profiles`); nothing about profiles is imported until a verb needs it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Optional, Tuple

import click

from ..backends.registry import DEFAULT_BACKEND, get_backend, open_backend, profile_keys

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..job import Job

__all__ = ["chosen_profile", "job_for", "open_for", "profile_backend", "profile_option"]

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
    """Backend ``name`` as ``ma-submit`` makes it, configured by the profile in use (a bad or refused profile
    is a ConfigError even for a backend that takes nothing from it)."""
    from ..profiles.apply import backend_arguments, profile_environ, selected

    given = chosen_profile()
    if not profile_keys(name):  # nothing to take from a profile; still check a profile that was named
        if given is not None:
            selected(os.environ, given)
        return open_backend(name)
    profile = selected(os.environ, given)
    if profile is None:
        return open_backend(name)
    arguments = backend_arguments(name, profile, os.environ)
    return get_backend(name, environ=profile_environ(os.environ, profile.name), **arguments)


def profile_backend() -> str:
    """The backend of the verbs without a JOB_ID (list, prune) when none is named: the profile's, else the default."""
    from ..profiles.apply import selected

    profile = selected(os.environ, chosen_profile())
    return (profile.get("backend") if profile is not None else None) or DEFAULT_BACKEND


def job_for(job_file: str, backend: Optional[str], run_method: Optional[str]) -> Tuple[Job, Optional[str]]:
    """The job of ``job_file`` with the command line's ``backend`` and ``run_method``, the profile in use filling
    what the job file leaves out; and the block ``--dry-run`` prints about where the values came from (None
    when no profile is in use)."""
    from ..job import Job
    from ..profiles.apply import load_job, render_origins, selected

    profile = selected(os.environ, chosen_profile())
    if profile is None:
        return Job.from_yaml(job_file, run_method=run_method, backend=backend), None
    spec, rows = load_job(job_file, profile, backend, os.environ)
    return Job(spec).with_options(run_method=run_method, backend=backend), render_origins(profile, rows)
