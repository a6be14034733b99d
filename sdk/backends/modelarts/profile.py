"""What a malaunch profile may keep for the ModelArts backend (``modelarts.<key>`` in the profile file).

The registry reads :data:`PROFILE_KEYS` (:func:`malaunch.sdk.backends.registry.profile_keys`) only when a profile
is written, shown or used, so asking the backend's other facts costs nothing more. The credentials (ak, sk,
project_id, region, security_token; their variables in :mod:`.variables`) are read by :mod:`.credentials` as one
set: from the environment, else from the profile in use when it has ``ak``, else from ``modelarts.ini``.
"""

from __future__ import annotations

from typing import Tuple

from ...profiles.keys import ProfileKey
from .variables import (
    ENV_AK,
    ENV_MODELARTS_ENDPOINT,
    ENV_OBS_ENDPOINT,
    ENV_PROJECT_ID,
    ENV_REGION,
    ENV_SECURITY_TOKEN,
    ENV_SK,
)

__all__ = ["PROFILE_KEYS"]

_LEGACY = "the [default] of modelarts.ini, if any"
_PUBLIC = "the region's public endpoint"
#: The keys, in the order ``ma-submit configure`` asks for them.
PROFILE_KEYS: Tuple[ProfileKey, ...] = (
    ProfileKey("region", "the region, e.g. cn-north-4", env=ENV_REGION, default=_LEGACY, env_set=ENV_AK),
    ProfileKey("project_id", "the project id of that region", env=ENV_PROJECT_ID, default=_LEGACY, env_set=ENV_AK),
    ProfileKey("ak", "the access key id", env=ENV_AK, secret=True, default=_LEGACY),
    ProfileKey("sk", "the secret access key", env=ENV_SK, secret=True, stdin=True, default=_LEGACY, env_set=ENV_AK),
    ProfileKey(
        "security_token",
        "temporary credentials' token",
        env=ENV_SECURITY_TOKEN,
        secret=True,
        stdin=True,
        env_set=ENV_AK,
    ),
    ProfileKey("endpoint", "the ModelArts API (scheme://host[:port])", env=ENV_MODELARTS_ENDPOINT, default=_PUBLIC),
    ProfileKey("obs_endpoint", "the OBS API (scheme://host[:port])", env=ENV_OBS_ENDPOINT, default=_PUBLIC),
    ProfileKey("obs_dir", "the job's OBS folder (bucket), obs://BUCKET/PATH", fills="modelarts.obs_dir"),
    ProfileKey("flavor", "the resource flavor", fills="resources.flavor"),
    ProfileKey("pool", "a dedicated resource pool", fills="resources.pool"),
)
