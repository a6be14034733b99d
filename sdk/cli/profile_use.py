"""The profile a verb uses and the backend it makes with it, without click.

The profile in use is the one named (``--profile NAME``), else ``$MALAUNCH_PROFILE``, else ``default`` when it
exists (:mod:`malaunch.sdk.profiles`). The click side,
the ``--profile`` option and the verbs that read a job file, is :mod:`.profile_option`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional

from ..backends.registry import DEFAULT_BACKEND
from ..opening import open_backend
from ..profiles.check import check_keys
from ..profiles.store import select

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..profiles.store import Profile

__all__ = ["backend_of_profile", "open_with", "selected_profile"]


def selected_profile(given: Optional[str]) -> Optional[Profile]:
    """The profile in use (``given`` when named), checked."""
    profile = select(os.environ, given)
    if profile is None:
        return None
    return check_keys(profile)


def open_with(name: str, given: Optional[str]) -> Backend:
    """Backend ``name`` as ``ma-submit`` makes it (:func:`~malaunch.sdk.backends.open_backend`), configured by the
    profile in use (``given`` when named); a profile named but missing or refused is a ConfigError even for a
    backend that takes nothing from it."""
    if given is not None:
        selected_profile(given)
    return open_backend(name, profile=given)


def backend_of_profile(given: Optional[str]) -> str:
    """The backend of the verbs without a JOB_ID (list, prune) when none is named: the profile's, else the default."""
    profile = selected_profile(given)
    return (profile.get("backend") if profile is not None else None) or DEFAULT_BACKEND
