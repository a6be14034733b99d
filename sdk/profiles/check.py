"""Which keys a profile may hold, and the profile in use with its keys checked: what every verb that uses a profile
needs, and no more (no job file, no spec, no sweeps), so that ``ma-submit list`` with a profile stays quick.

- :func:`keys_of`: the keys that apply to a job of one backend (the shared ones, then the backend's own);
- :func:`all_keys`: every key a profile may hold, shared and per backend (each backend declares its own);
- :func:`check_keys`: a profile's keys are known (a typo is an error naming the profile and the key);
- :func:`selected`: the profile in use, read and checked.

What a profile does to a job file and to a backend is :mod:`.apply`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Mapping, Optional

from ..backends.registry import BACKEND_NAMES, profile_keys
from ..errors import ConfigError
from .keys import SHARED_KEYS
from .store import select

if TYPE_CHECKING:
    from .keys import ProfileKey
    from .store import Profile

__all__ = ["all_keys", "check_keys", "keys_of", "selected"]


def keys_of(backend: Optional[str]) -> Dict[str, ProfileKey]:
    """The keys that apply to a job of ``backend`` (the shared ones, then the backend's own), by full name."""
    keys = {key.name: key for key in SHARED_KEYS}
    if backend is not None:
        keys.update({f"{backend}.{key.name}": key for key in profile_keys(backend)})
    return keys


def all_keys() -> Dict[str, ProfileKey]:
    """Every key a profile may hold, by full name (``image``, ``modelarts.region``, ``volcano.queue``)."""
    keys: Dict[str, ProfileKey] = {}
    for name in BACKEND_NAMES:
        keys.update(keys_of(name))
    return keys


def check_keys(profile: Profile) -> Profile:
    """``profile`` when every key is known and its ``backend`` is a backend; else a ConfigError."""
    known = all_keys()
    for key in profile.values:
        if key not in known:
            raise ConfigError(
                f"profile {profile.name} in {profile.path} has an unknown key", key,
                f"remove it (known keys: {', '.join(known)})",
            )  # fmt: skip
    backend = profile.get("backend")
    if backend is not None and backend not in BACKEND_NAMES:
        raise ConfigError(
            f"profile {profile.name}: backend is not a backend", backend,
            f"run 'ma-submit configure --profile {profile.name} --backend {'|'.join(BACKEND_NAMES)}'",
        )  # fmt: skip
    return profile


def selected(environ: Mapping[str, str], given: Optional[str] = None) -> Optional[Profile]:
    """The profile in use (:func:`.store.select`), its keys checked (:func:`check_keys`); None: no profile."""
    profile = select(environ, given)
    return None if profile is None else check_keys(profile)
