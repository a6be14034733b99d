"""Masking secrets for everything ``ma-submit`` prints (``--dry-run`` plans, statuses), shared by all backends.

A variable or field whose name contains ``KEY``, ``SECRET``, ``TOKEN`` or ``PASSWORD`` (any case) is secret:
its value is shown as :data:`MASK`. Only what is printed is masked; what is submitted keeps the real values.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

__all__ = ["MASK", "SECRET_WORDS", "is_secret_name", "mask_data", "mask_env"]

SECRET_WORDS = ("KEY", "SECRET", "TOKEN", "PASSWORD")
MASK = "***"


def is_secret_name(name: str) -> bool:
    """True for names like ``AWS_SECRET_ACCESS_KEY``, ``HF_TOKEN``, ``db_password``."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def mask_env(env: Mapping[str, str]) -> Dict[str, str]:
    """A copy of ``env`` with the values of secret-looking names masked."""
    return {key: (MASK if is_secret_name(key) and value else value) for key, value in env.items()}


def mask_data(data: Any) -> Any:
    """A copy of JSON-like ``data`` in which every scalar under a secret-looking key is masked, at any depth."""
    if isinstance(data, Mapping):
        out: Dict[Any, Any] = {}
        for key, value in data.items():
            secret = isinstance(key, str) and is_secret_name(key)
            plain = isinstance(value, (str, int, float)) and not isinstance(value, bool)
            out[key] = MASK if secret and plain and value != "" else mask_data(value)
        return out
    if isinstance(data, (list, tuple)):
        return [mask_data(item) for item in data]
    return data
