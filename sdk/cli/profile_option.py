"""``--profile NAME`` on every verb that submits or asks a backend, and how those verbs use the profile.

The option only remembers the name in the click context (verbs keep their signatures), and
:func:`chosen_profile` reads it back. The profile in use is the one named, else ``$MALAUNCH_PROFILE``, else
``default`` when it exists (:mod:`malaunch.sdk.profiles`); making a backend with it (the profile's connection
settings: a Volcano context, the ModelArts credentials) is :mod:`.profile_use`, which this module does not import,
so that a verb's definition (``submit``'s options) loads no profile or backend code. A job file read with the
profile's values filled in is the business of the verbs that read one (``submit``: ``job_for``, ``sweep``:
``sweep_for``), so that the others load neither the YAML parser nor the job API.
"""

from __future__ import annotations

from typing import Any, Optional

import click

__all__ = ["chosen_profile", "profile_option", "profile_param"]

_META = "malaunch.profile"


def _remember(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[str]:
    del param
    if value is not None:
        ctx.meta[_META] = value
    return value


_HELP = "Use this profile ('ma-submit configure'). Default: $MALAUNCH_PROFILE, else the profile 'default'."


def profile_param() -> click.Option:
    """The ``--profile NAME`` option (its value is kept for :func:`chosen_profile`, not passed to the verb)."""
    return click.Option(["--profile"], metavar="NAME", expose_value=False, callback=_remember, help=_HELP)


def profile_option(function: Any) -> Any:
    """:func:`profile_param` as a decorator, for a command defined by its function."""
    return click.option("--profile", metavar="NAME", expose_value=False, callback=_remember, help=_HELP)(function)


def chosen_profile() -> Optional[str]:
    """The ``--profile`` given to the running verb, or None."""
    ctx = click.get_current_context(silent=True)
    value = ctx.meta.get(_META) if ctx is not None else None
    return value if isinstance(value, str) else None
