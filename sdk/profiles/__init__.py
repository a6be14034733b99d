"""Named profiles: what a user would otherwise type for every job (backend, image, a bucket, a cluster, keys).

``ma-submit configure`` writes them (:mod:`malaunch.sdk.cli.configure`); ``--profile NAME`` or
``$MALAUNCH_PROFILE`` picks one, else the profile ``default``. The file and its rules: :mod:`.store`; the keys:
:mod:`.keys` (each backend declares its own, so the backends import this package: it stays light, and what a
profile does to a job and to a backend is in :mod:`.apply`, imported by name).
"""

from __future__ import annotations

from .keys import SHARED_KEYS, ProfileKey
from .store import DEFAULT_PROFILE, PROFILE_VARIABLE, Profile, profiles_path, read_profiles, select, write_profile

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILE_VARIABLE",
    "SHARED_KEYS",
    "Profile",
    "ProfileKey",
    "profiles_path",
    "read_profiles",
    "select",
    "write_profile",
]
