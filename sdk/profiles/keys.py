"""The keys a profile may hold: the ones every backend shares (here) and each backend's own (declared by the
backend, in its module ``<backend>/profile.py`` as ``PROFILE_KEYS``, and gathered by the registry).

A key is written ``name`` (shared) or ``<backend>.<name>`` (a backend's own) in the profile file. Each key either
fills a job-file field the job file left out (``fills``: ``image``, ``resources.flavor``, ``volcano.namespace``),
or configures the backend itself (``argument``: a keyword of the backend's ``create_backend``; or neither, when
the backend reads the profile itself, as the ModelArts credentials are read). ``env``: the variable that beats the
profile's value (``env_set``: only when that variable is set too, for a set of values read together, as the
ModelArts credentials are); ``secret``: the value is never printed; ``stdin``: ``ma-submit configure`` takes it from a
hidden prompt or standard input, never as an option's value (other users see a command line).
"""

from __future__ import annotations

import re
from typing import Mapping, NamedTuple, Optional, Tuple

__all__ = ["KEY_NAME", "SHARED_KEYS", "ProfileKey"]

#: What a key's name may look like (``image``, ``modelarts.obs_dir``).
KEY_NAME = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)?\Z")


class ProfileKey(NamedTuple):
    """One key of a profile (see the module docstring); ``name`` is the key without its backend's prefix. An
    immutable named tuple, as the records the everyday verbs read are (no ``dataclasses`` at their start-up)."""

    name: str
    help: str
    fills: Optional[str] = None
    argument: Optional[str] = None
    env: Optional[str] = None
    secret: bool = False
    stdin: bool = False
    default: str = "none"
    env_set: Optional[str] = None

    def from_env(self, environ: Mapping[str, str]) -> Optional[str]:
        """The environment's value, which beats the profile's; None when it has none (or, for a key of a set
        read together, when ``env_set``, the variable that makes the environment the set's source, is unset)."""
        if self.env is None or (self.env_set is not None and not environ.get(self.env_set)):
            return None
        return environ.get(self.env) or None

    @property
    def flag(self) -> str:
        """The option of ``ma-submit configure`` that sets it (``--obs-dir``)."""
        return "--" + self.name.replace("_", "-")


#: The keys every backend shares. ``keep_for`` is kept as a duration text; it fills the job file's ``keep_for``
#: where the job spec has that field.
SHARED_KEYS: Tuple[ProfileKey, ...] = (
    ProfileKey("backend", "the backend of a job file that names none", fills="backend", default="local"),
    ProfileKey("image", "the training image of a job file that names none", fills="image"),
    ProfileKey("keep_for", "how long an ended job is kept (90s, 30m, 12h, 7d, 2w)", fills="keep_for"),
    ProfileKey("notify", "the notification targets of a job file that names none (a YAML or JSON list)",
               fills="notify", secret=True),  # a webhook's URL may hold its token: never printed
)
