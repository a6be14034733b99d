"""ModelArts credentials and endpoints, from the environment or a private profile file.

Credentials come from the official SDK's variables ``HUAWEICLOUD_SDK_AK``, ``HUAWEICLOUD_SDK_SK``,
``HUAWEICLOUD_SDK_PROJECT_ID``, ``HUAWEICLOUD_SDK_REGION`` and (temporary credentials)
``HUAWEICLOUD_SDK_SECURITY_TOKEN``; when ``HUAWEICLOUD_SDK_AK`` is unset, from the malaunch profile in use
(:mod:`malaunch.sdk.profiles`) when it has ``modelarts.ak`` (then ``modelarts.sk``, ``modelarts.project_id``,
``modelarts.region`` and optionally ``modelarts.security_token``); else from the ``[default]`` section of an INI
profile (``$MALAUNCH_MODELARTS_PROFILE``, default ``~/.config/malaunch/modelarts.ini``) with keys ``ak``, ``sk``,
``project_id``, ``region``, ``security_token``. A file that group or others can read is refused. Endpoints are
the region's public ones unless ``MALAUNCH_MODELARTS_ENDPOINT`` / ``MALAUNCH_OBS_ENDPOINT`` (else the profile's
``modelarts.endpoint`` / ``modelarts.obs_endpoint``) say otherwise (``http://127.0.0.1:PORT`` works). The
secret key is never part of a ``repr`` or a message.
"""

from __future__ import annotations

import configparser
import ipaddress
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional
from urllib.parse import urlsplit

from ...errors import ConfigError
from ...profiles.store import Profile, check_private, select
from .variables import (
    ENV_AK,
    ENV_MODELARTS_ENDPOINT,
    ENV_OBS_ENDPOINT,
    ENV_PROFILE,
    ENV_PROJECT_ID,
    ENV_REGION,
    ENV_SECURITY_TOKEN,
    ENV_SK,
)

__all__ = [
    "Credentials",
    "Endpoints",
    "is_ip_endpoint",
    "load_credentials",
    "load_endpoints",
    "mask",
]

_DEFAULT_PROFILE = os.path.join("~", ".config", "malaunch", "modelarts.ini")
_REGION = re.compile(r"[a-z0-9][a-z0-9-]{1,40}\Z")


def mask(key: str) -> str:
    """An access key shortened for messages: first 4 characters, then ``...``."""
    return key[:4] + "..." if len(key) > 4 else "..."


@dataclass(frozen=True)
class Credentials:
    """An AK/SK pair for one project and region; ``source`` says where it came from (for messages)."""

    ak: str
    sk: str = field(repr=False)
    project_id: str
    region: str
    source: str
    security_token: Optional[str] = field(default=None, repr=False)


@dataclass(frozen=True)
class Endpoints:
    """Base URLs (scheme://host[:port], no path) of the ModelArts API and of OBS."""

    modelarts: str
    obs: str


def _from_env(environ: Mapping[str, str]) -> Credentials:
    source = f"the environment ({ENV_AK}, {ENV_SK})"
    values = {}
    for name in (ENV_AK, ENV_SK, ENV_PROJECT_ID, ENV_REGION):
        value = environ.get(name, "").strip()
        if not value:
            raise ConfigError(f"{name} is not set but {ENV_AK} is", "", f"export {name} as well")
        values[name] = value
    return Credentials(
        ak=values[ENV_AK],
        sk=values[ENV_SK],
        project_id=values[ENV_PROJECT_ID],
        region=values[ENV_REGION],
        source=source,
        security_token=environ.get(ENV_SECURITY_TOKEN) or None,
    )


def _from_values(values: Mapping[str, str], source: str, where: str, hint: str) -> Credentials:
    """Credentials from a file's ``values`` (``ak``, ``sk``, ``project_id``, ``region``, ``security_token``);
    ``where`` names the file in messages, ``hint`` says how to add a missing key (``{key}`` is replaced)."""
    found = {}
    for key in ("ak", "sk", "project_id", "region"):
        value = values.get(key, "").strip()
        if not value:
            raise ConfigError(f"{where} lacks {key}", key, hint.format(key=key))
        found[key] = value
    return Credentials(
        ak=found["ak"],
        sk=found["sk"],
        project_id=found["project_id"],
        region=found["region"],
        source=source,
        security_token=values.get("security_token", "").strip() or None,
    )


def _from_profile(path: str) -> Credentials:
    source = f"the profile {path}"
    info = os.stat(path)
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"the credentials profile {path} can be read by others (mode {stat.S_IMODE(info.st_mode):o})",
            path,
            f"run 'chmod 600 {path}'",
        )
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, encoding="utf-8") as handle:
            parser.read_file(handle)
    except (OSError, UnicodeDecodeError, configparser.Error) as exc:
        raise ConfigError(f"cannot read the credentials profile ({type(exc).__name__})", path, "fix it") from None
    if not parser.has_section("default"):
        raise ConfigError("the credentials profile has no [default] section", path, "add one with ak, sk, ...")
    where = f"the credentials profile {path}"
    return _from_values(parser["default"], source, where, "add '{key} = ...' to [default]")


def _modelarts_values(profile: Optional[Profile]) -> Dict[str, str]:
    """The ``modelarts.*`` values of ``profile``, without the prefix."""
    if profile is None:
        return {}
    return {key.split(".", 1)[1]: value for key, value in profile.values.items() if key.startswith("modelarts.")}


def _from_malaunch_profile(profile: Profile) -> Credentials:
    check_private(profile)  # its secrets are read here: refused while others may read them
    where = f"profile {profile.name} in {profile.path}"
    hint = f"run 'ma-submit configure --profile {profile.name}' and give modelarts.{{key}}"
    return _from_values(_modelarts_values(profile), f"profile {profile.name} ({profile.path})", where, hint)


def load_credentials(environ: Mapping[str, str]) -> Credentials:
    """Credentials from ``environ``, else from the profile file (see the module docstring).

    Raises:
        ConfigError: none found, incomplete, or a profile others can read.
    """
    profile = None if environ.get(ENV_AK) else select(environ)
    if environ.get(ENV_AK):
        creds = _from_env(environ)
    elif profile is not None and profile.get("modelarts.ak"):
        creds = _from_malaunch_profile(profile)
    else:
        path = os.path.expanduser(environ.get(ENV_PROFILE) or _DEFAULT_PROFILE)
        if not os.path.isfile(path):
            raise ConfigError(
                "no ModelArts credentials found",
                path,
                f"run 'ma-submit configure --backend modelarts', or export {ENV_AK}, {ENV_SK}, {ENV_PROJECT_ID} "
                f"and {ENV_REGION}, or write that file (chmod 600)",
            )
        creds = _from_profile(path)
    if not _REGION.match(creds.region):
        raise ConfigError(f"region from {creds.source} is not a region id", creds.region, "use e.g. cn-north-4")
    return creds


def _endpoint(name: str, value: str) -> str:
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise ConfigError(
            f"{name} must be scheme://host[:port]", value, "e.g. https://modelarts.cn-north-4.myhuaweicloud.com"
        )
    return f"{parts.scheme}://{parts.netloc}"


def load_endpoints(region: str, environ: Mapping[str, str]) -> Endpoints:
    """The region's public endpoints, or the overrides in ``environ``, else in the profile in use."""
    values = _modelarts_values(select(environ)) if not (environ.get(ENV_MODELARTS_ENDPOINT)
                                                        and environ.get(ENV_OBS_ENDPOINT)) else {}  # fmt: skip
    modelarts = environ.get(ENV_MODELARTS_ENDPOINT) or values.get("endpoint")
    obs = environ.get(ENV_OBS_ENDPOINT) or values.get("obs_endpoint")
    modelarts = modelarts or f"https://modelarts.{region}.myhuaweicloud.com"
    obs = obs or f"https://obs.{region}.myhuaweicloud.com"
    return Endpoints(_endpoint(ENV_MODELARTS_ENDPOINT, modelarts), _endpoint(ENV_OBS_ENDPOINT, obs))


def is_ip_endpoint(url: str) -> bool:
    """True for an endpoint addressed by IP or ``localhost`` (it needs path-style OBS addressing)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
