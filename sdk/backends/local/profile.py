"""What a profile may keep for the local backend: ``local.capacity``, the devices its queue lets jobs take at once.

Read by the registry (:func:`malaunch.sdk.backends.registry.profile_keys`) only when a profile is used.
"""

from __future__ import annotations

from typing import Tuple

from ...profiles.keys import ProfileKey

__all__ = ["PROFILE_KEYS"]

#: The keys, in the order ``ma-submit configure`` asks for them.
PROFILE_KEYS: Tuple[ProfileKey, ...] = (
    ProfileKey(
        "capacity",
        "the devices local jobs may take at once (the queue); MALAUNCH_LOCAL_CAPACITY beats it",
        argument="capacity",
        env="MALAUNCH_LOCAL_CAPACITY",
        default="the accelerators this machine shows, else its CPUs",
    ),
)
