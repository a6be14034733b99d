"""How a profile configures a backend (its keys with an ``argument``), light enough for every verb: a backend
with profile keys is made with it on ``status`` and ``list`` too, which must not load the job-file reader."""

from __future__ import annotations

from typing import Dict, Mapping, Optional

from .check import keys_of
from .store import PROFILE_VARIABLE, Profile

__all__ = ["backend_arguments", "profile_environ"]


def backend_arguments(backend: str, profile: Optional[Profile], environ: Mapping[str, str]) -> Dict[str, str]:
    """Keyword arguments of backend ``backend``'s ``create_backend`` that ``profile`` gives (a key with an
    ``argument``), except where the environment's variable beats it."""
    if profile is None:
        return {}
    out: Dict[str, str] = {}
    for name, key in keys_of(backend).items():
        value = profile.get(name)
        if key.argument and value is not None and key.from_env(environ) is None:
            out[key.argument] = value
    return out


def profile_environ(environ: Mapping[str, str], name: Optional[str]) -> Mapping[str, str]:
    """A copy of ``environ`` with ``$MALAUNCH_PROFILE`` set to ``name`` (``environ`` itself for None)."""
    return environ if name is None else {**environ, PROFILE_VARIABLE: name}
