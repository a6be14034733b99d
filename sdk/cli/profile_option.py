"""``--profile NAME`` on every verb that submits or asks a backend, and how those verbs use the profile.

The option only remembers the name in the click context (verbs keep their signatures); :func:`open_for` makes a
backend as ``ma-submit`` makes it, with the profile's connection settings (a Volcano context, the ModelArts
credentials through ``$MALAUNCH_PROFILE``). The profile in use is the one named, else ``$MALAUNCH_PROFILE``, else
``default`` when it exists (:mod:`malaunch.sdk.profiles`); what does not need click is in :mod:`.profile_use`. A job
file read with the profile's values filled in is the business of the verbs that read one (``submit``: ``job_for``,
``sweep``: ``sweep_for``), so that the others load neither the YAML parser nor the job API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import click

from .profile_use import backend_of_profile, open_with

if TYPE_CHECKING:
    from ..backends.base import Backend

__all__ = ["chosen_profile", "open_for", "profile_backend", "profile_option"]

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
