"""Masking secrets for everything ``ma-submit`` prints (``--dry-run`` plans, statuses), shared by all backends.

A variable or field whose name contains ``KEY``, ``SECRET``, ``TOKEN`` or ``PASSWORD`` (any case) is secret:
its value is shown as :data:`MASK`. A notification webhook's URL (a ``url`` field, and the URLs in
``MALAUNCH_NOTIFY``) is shown with its scheme and host only: a Slack or Teams webhook's path is its token, and a
password or a query may be one too. Only what is printed is masked; what is submitted keeps the real values.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Mapping

__all__ = ["MASK", "SECRET_WORDS", "is_secret_name", "mask_data", "mask_env", "mask_urls"]

SECRET_WORDS = ("KEY", "SECRET", "TOKEN", "PASSWORD")
MASK = "***"
#: A URL: its scheme, any user and password before an ``@``, its host and port, and the rest (path, query, fragment).
_URL_PATH = re.compile(r"(https?://)(?:[^/\s\"'?#]*@)?([^/\s\"'?#@]+)[^\s\"']*", re.IGNORECASE)
#: Variables whose value holds webhook URLs.
_URL_VARIABLES = ("MALAUNCH_NOTIFY",)


def mask_urls(text: str) -> str:
    """``text`` with every http(s) URL shown by its scheme and host only: ``https://host/...`` (a user and password
    before the host, the path, the query and the fragment may each hold a token)."""
    return _URL_PATH.sub(r"\1\2/...", text)


def is_secret_name(name: str) -> bool:
    """True for names like ``AWS_SECRET_ACCESS_KEY``, ``HF_TOKEN``, ``db_password``."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def mask_env(env: Mapping[str, str]) -> Dict[str, str]:
    """A copy of ``env`` with the values of secret-looking names masked."""
    return {key: (MASK if is_secret_name(key) and value else mask_urls(value) if key in _URL_VARIABLES else value)
            for key, value in env.items()}  # fmt: skip


def mask_data(data: Any, notify: bool = False) -> Any:
    """A copy of JSON-like ``data`` in which every scalar under a secret-looking key (or the ``value`` of a
    ``{name, value}`` entry with a secret-looking name) is masked, at any depth; the ``url`` of each ``notify``
    target, and ``MALAUNCH_NOTIFY``, show their URLs' hosts only."""
    if isinstance(data, Mapping):
        out: Dict[Any, Any] = {}
        named, given = data.get("name"), data.get("value")
        entry = isinstance(named, str) and isinstance(given, str) and bool(given)  # a Kubernetes env {name, value}
        if entry and (is_secret_name(str(named)) or named in _URL_VARIABLES):
            shown = MASK if is_secret_name(str(named)) else mask_urls(str(given))
            return {**{key: mask_data(value, notify) for key, value in data.items()}, "value": shown}
        for key, value in data.items():
            secret = isinstance(key, str) and is_secret_name(key)
            plain = isinstance(value, (str, int, float)) and not isinstance(value, bool)
            if isinstance(value, str) and (key in _URL_VARIABLES or (notify and key == "url")):
                out[key] = mask_urls(value)
                continue
            out[key] = MASK if secret and plain and value != "" else mask_data(value, notify or key == "notify")
        return out
    if isinstance(data, (list, tuple)):
        return [mask_data(item, notify) for item in data]
    return data
