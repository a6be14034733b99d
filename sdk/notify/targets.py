"""A job's notification targets (the job file's ``notify:`` list): the model and its checks (how data becomes it is
:mod:`.fromdata`, with the YAML parser a profile's text needs).

Each target is a webhook (``url:``, http or https; ``secret_env:`` names the variable holding the HMAC secret,
never the secret itself) or a command (``command:``, an argv list, run without a shell), with the ``events:`` it
wants (default ``failed`` and ``succeeded``). Checks here are pure: whether a command is found and a secret is
set on this machine is :mod:`.check`'s (at submit).
"""

from __future__ import annotations

import math
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from malaunch.entrypoint.public import DEFAULT_NOTIFY_EVENTS, NOTIFY_EVENTS, target_label

from ..spec.checks import check_text, check_words, fail

__all__ = ["TARGET_KEYS", "NotifyTarget", "check_notify_timeout", "check_targets"]

#: The keys a target may have.
TARGET_KEYS = ("url", "secret_env", "command", "events")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: ``notify_timeout``'s bounds, in seconds (the shim's).
TIMEOUT_BOUNDS = (0.1, 3600.0)


@dataclass(frozen=True)
class NotifyTarget:
    """One target: ``url`` (with an optional ``secret_env``) or ``command``; the ``events`` it is sent."""

    url: Optional[str] = None
    secret_env: Optional[str] = None
    command: Tuple[str, ...] = ()
    events: Tuple[str, ...] = DEFAULT_NOTIFY_EVENTS

    def __post_init__(self) -> None:
        _check_target(self, "notify[0]")

    @property
    def label(self) -> str:
        """How it may be shown (a URL's scheme and host only: its path may hold a token)."""
        return str(target_label(self.to_dict()))

    def to_dict(self) -> Dict[str, Any]:
        """YAML/JSON-shaped data (the keys it has)."""
        data: Dict[str, Any] = {}
        if self.url is not None:
            data["url"] = self.url
        if self.secret_env is not None:
            data["secret_env"] = self.secret_env
        if self.command:
            data["command"] = list(self.command)
        data["events"] = list(self.events)
        return data


def _check_target(target: NotifyTarget, path: str) -> None:
    if (target.url is None) == (not target.command):
        raise fail(path, "must have either url (a webhook) or command (an argv list)", target.to_dict(),
                   "give one of url: https://... or command: [program, args...]")  # fmt: skip
    if target.url is not None:
        check_text(f"{path}.url", target.url)
        if any(char.isspace() for char in target.url):  # the HTTP client refuses it, and would say the path
            raise fail(f"{path}.url", "must hold no space (write it as %20)", target.label,
                       "give the webhook's address as its service shows it")  # fmt: skip
        try:
            parts = urllib.parse.urlsplit(target.url)
        except ValueError:  # a broken address, such as http://[::1/x
            parts = urllib.parse.urlsplit("")
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:
            raise fail(f"{path}.url", "must be an http:// or https:// URL", target.label if scheme else target.url,
                       "give the webhook's https:// address")  # fmt: skip
        try:
            port = parts.port
        except ValueError:
            port = 0
        if port == 0:
            raise fail(f"{path}.url", "its port must be a number from 1 to 65535", target.label,
                       "give the webhook's address as its service shows it")  # fmt: skip
    if target.secret_env is not None:
        if target.url is None:
            raise fail(f"{path}.secret_env", "is for a webhook (url) only", target.secret_env)
        if not isinstance(target.secret_env, str) or not _ENV_NAME.match(target.secret_env):
            raise fail(f"{path}.secret_env", "must be the name of an environment variable (not the secret)",
                       "(hidden)", "set secret_env: NAME and export NAME=<secret>")  # fmt: skip
    check_words(f"{path}.command", target.command)
    if target.command and not target.command[0].strip():
        raise fail(f"{path}.command[0]", "must name a program", target.command[0])
    if not isinstance(target.events, tuple) or not target.events:
        raise fail(f"{path}.events", f"must be a non-empty list of {', '.join(NOTIFY_EVENTS)}", target.events)
    for index, event in enumerate(target.events):
        if event not in NOTIFY_EVENTS:
            raise fail(f"{path}.events[{index}]", f"must be one of {', '.join(NOTIFY_EVENTS)}", event)


def check_targets(targets: object) -> None:
    """``notify``: a tuple of targets, each checked with its own path (``notify[1].url``)."""
    if not isinstance(targets, tuple):
        raise fail("notify", "must be a list of targets (url: or command:)", targets)
    for index, target in enumerate(targets):
        if not isinstance(target, NotifyTarget):
            raise fail(f"notify[{index}]", "must be a mapping with url or command", target)
        _check_target(target, f"notify[{index}]")


def check_notify_timeout(value: object) -> None:
    """``notify_timeout``: None (the default, 10 s) or seconds within :data:`TIMEOUT_BOUNDS`."""
    if value is None:
        return
    low, high = TIMEOUT_BOUNDS
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:  # fmt: skip
        raise fail("notify_timeout", f"must be a number of seconds from {low:g} to {high:g}", value)
