"""A webhook's signature: ``X-Malaunch-Signature: sha256=<hex>``, the HMAC-SHA256 of the body with the target's
secret (:mod:`.notify`'s contract, item 3). Pure.

A module of its own so that only what signs loads ``hashlib`` and ``hmac``: the webhook program (:mod:`.webhook`)
and the SDK's local sender (through ``public.py``), never the shim's run.
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["SIGNATURE_HEADER", "sign"]

SIGNATURE_HEADER = "X-Malaunch-Signature"


def sign(secret: bytes, body: bytes) -> str:
    """The signature header's value: ``sha256=`` and the HMAC-SHA256 of ``body`` with ``secret``, in hex."""

    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
