"""The profile file: one INI file of named profiles under the user's config directory, kept private.

- Where: ``$XDG_CONFIG_HOME/malaunch/profiles.ini`` (``~/.config/malaunch/profiles.ini`` when the variable is
  unset or not an absolute path, as the XDG rules say); :func:`profiles_path`.
- Which profile: the one named (``--profile NAME``), else ``$MALAUNCH_PROFILE``, else ``default`` when the file
  has it; a profile that is named but missing is an error, a missing ``default`` is no profile (:func:`select`).
- Rules: the file is written atomically with mode 0600 (:func:`write_profile`). When group or others may read it,
  every read warns once on stderr, and the secrets in it (``modelarts.ak``, ``modelarts.sk``) are refused where
  they are read (:func:`check_private`), exactly as the ModelArts credentials file is; the rest of the profile
  still works (a local ``list`` does not fail for it). A damaged file, an unknown key or a value on several
  lines is one clear line (:class:`~malaunch.sdk.errors.ConfigError`), never a traceback. Values are never part
  of a message or a ``repr`` (a profile may hold a secret key).
"""

from __future__ import annotations

import io
import os
import re
import stat
import sys
from typing import TYPE_CHECKING, Dict, Mapping, NamedTuple, Optional, Tuple

from malaunch.entrypoint.public import write_atomic

from ..errors import ConfigError
from ..home import file_lock

if TYPE_CHECKING:
    import configparser

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILE_VARIABLE",
    "Profile",
    "check_private",
    "check_profile_name",
    "profiles_path",
    "read_profiles",
    "select",
    "write_profile",
]

#: The variable that names the profile when ``--profile`` is not given.
PROFILE_VARIABLE = "MALAUNCH_PROFILE"
#: The profile used when none is named (only when the file has it).
DEFAULT_PROFILE = "default"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
_NO_DEFAULTS = "malaunch: no defaults section"  # no section of the file is special


class Profile(NamedTuple):
    """A profile read from ``path``: its ``name`` and its ``values`` (key -> text; never shown whole)."""

    name: str
    path: str
    values: Mapping[str, str]
    #: The file's permission bits when it was read.
    mode: int = 0o600

    def __repr__(self) -> str:  # never the values: they may hold keys
        return f"Profile(name={self.name!r}, path={self.path!r})"

    def get(self, key: str) -> Optional[str]:
        """The value of ``key`` (``modelarts.region``), or None when the profile does not set it."""
        return self.values.get(key) or None


def profiles_path(environ: Mapping[str, str]) -> str:
    """``$XDG_CONFIG_HOME/malaunch/profiles.ini``, else ``~/.config/malaunch/profiles.ini``."""
    base = environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".config")
    return os.path.join(base, "malaunch", "profiles.ini")


def check_profile_name(name: str) -> str:
    """``name`` when it can name a profile (letters, digits, ``_.-``; up to 64); else a ConfigError."""
    if not _NAME.match(name):
        raise ConfigError(
            "a profile name must be letters, digits, '_', '.' or '-' (up to 64)", name, "e.g. --profile dev"
        )
    return name


#: The shared profile files this process warned of (once each).
_WARNED: set[str] = set()


def _shared(path: str, mode: int) -> str:
    return f"the profile file {path} can be read by others (mode {stat.S_IMODE(mode):o})"


def _warn_shared(path: str, mode: int) -> None:
    """Say once per process, on stderr, that others may read the file (its secrets are refused where read)."""
    if not mode & (stat.S_IRWXG | stat.S_IRWXO) or path in _WARNED:
        return
    _WARNED.add(path)
    try:
        sys.stderr.write(f"ma-submit: warning: {_shared(path, mode)}; its secrets are not used until you run "
                         f"'chmod 600 {path}'\n")  # fmt: skip
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr gone: the refusal where a secret is read still says it
        pass


def check_private(profile: Profile) -> Profile:
    """``profile`` when its file is private; where a secret of it is about to be read.

    Raises:
        ConfigError: group or others may read the profile file.
    """
    if profile.mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(_shared(profile.path, profile.mode), None, f"run 'chmod 600 {profile.path}'")
    return profile


def _where(exc: configparser.Error) -> str:
    """Where a parse error is: ``line N`` when the parser says, else its kind."""
    line = getattr(exc, "lineno", None)
    errors = getattr(exc, "errors", None)
    if line is None and errors:
        line = errors[0][0]
    return f"line {line}" if isinstance(line, int) else type(exc).__name__


def read_profiles(path: str) -> Dict[str, Dict[str, str]]:
    """Every profile of the file at ``path`` (name -> key -> value); ``{}`` when there is no file. A file others
    may read is warned of (:func:`check_private` refuses its secrets).

    Raises:
        ConfigError: the file cannot be read or parsed, or a value spans several lines.
    """
    return _read_profiles(path)[0]


def _read_profiles(path: str) -> Tuple[Dict[str, Dict[str, str]], int]:
    """:func:`read_profiles`, and the file's mode."""
    try:
        with open(path, encoding="utf-8") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            text = handle.read()
    except FileNotFoundError:
        return {}, 0o600
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise ConfigError(f"cannot read the profile file {path} ({reason})", None, "fix it or remove it") from None
    import configparser  # only with a profile file: the verbs of a user who has none do not load it

    parser = configparser.ConfigParser(interpolation=None, default_section=_NO_DEFAULTS)
    try:
        parser.read_string(text, source=path)
    except configparser.Error as exc:
        raise ConfigError(
            f"the profile file {path} is damaged ({_where(exc)})", None,
            "fix it, or remove it and run 'ma-submit configure' again",
        ) from None  # fmt: skip
    profiles: Dict[str, Dict[str, str]] = {}
    for name in parser.sections():
        values = dict(parser[name])
        for key, value in values.items():
            if "\n" in value:
                raise ConfigError(
                    f"the profile file {path} is damaged (profile {name}: {key} spans several lines)", None,
                    f"put {key} on one line, or run 'ma-submit configure --profile {name}' again",
                )  # fmt: skip
        profiles[name] = values
    _warn_shared(path, mode)
    return profiles, mode


def select(environ: Mapping[str, str], given: Optional[str] = None) -> Optional[Profile]:
    """The profile in use: ``given``, else ``$MALAUNCH_PROFILE``, else ``default`` (None when the file has no
    ``default``). The keys are not checked here (:func:`malaunch.sdk.profiles.check.check_keys` does).

    Raises:
        ConfigError: a bad name, a profile named but missing, or the file is refused (see :func:`read_profiles`).
    """
    named = given or environ.get(PROFILE_VARIABLE) or None
    name = check_profile_name(named) if named is not None else DEFAULT_PROFILE
    path = profiles_path(environ)
    profiles, mode = _read_profiles(path)
    if name not in profiles:
        if named is None:
            return None
        known = ", ".join(sorted(profiles)) or "none yet"
        origin = "--profile" if given else f"${PROFILE_VARIABLE}"
        raise ConfigError(
            f"no profile {name!r} ({origin}) in {path}",
            None,
            f"create it with 'ma-submit configure --profile {name}' (profiles: {known})",
        )
    return Profile(name, path, profiles[name], stat.S_IMODE(mode))


def _render(profiles: Mapping[str, Mapping[str, str]]) -> str:
    import configparser

    parser = configparser.ConfigParser(interpolation=None, default_section=_NO_DEFAULTS)
    for name in sorted(profiles):
        parser[name] = dict(sorted(profiles[name].items()))
    out = io.StringIO()
    out.write("# malaunch profiles: written by 'ma-submit configure' (keep this file private: mode 0600)\n")
    parser.write(out)
    return out.getvalue()


def write_profile(environ: Mapping[str, str], name: str, changes: Mapping[str, Optional[str]]) -> Profile:
    """Set (a text) or remove (None) keys of profile ``name``, creating the profile and the file as needed.

    The file is rewritten atomically with mode 0600 (its folder made 0700); writers are serialised by a lock
    file beside it. Returns the profile as written.

    Raises:
        ConfigError: a bad name or value, the file is refused (:func:`read_profiles`) or cannot be written.
    """
    check_profile_name(name)
    for key, value in changes.items():
        if value is not None and ("\n" in value or "\r" in value):
            raise ConfigError(f"the value of {key} spans several lines", None, "give it on one line")
    path = profiles_path(environ)
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        with file_lock(os.path.join(folder, ".profiles.lock")):
            profiles = read_profiles(path)
            values = dict(profiles.get(name, {}))
            for key, value in changes.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value.strip()
            profiles[name] = values
            write_atomic(path, _render(profiles), mode=0o600, durable=True, prefix=".tmp-profiles-")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(f"cannot write the profile file {path} ({reason})", None, "check the folder") from None
    return Profile(name, path, values)
