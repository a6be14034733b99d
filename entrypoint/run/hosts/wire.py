"""The coordinator's wire: one JSON object a line, each proved by an HMAC of the job's secret. Pure.

A connection starts with the coordinator's challenge, a line ``{"t": "challenge", "v": 1, "nonce": HEX}`` (the
only line without a proof). From then on every line is ``MAC BODY``: ``BODY`` is compact JSON with a ``seq``
counting from 0 in each direction, and ``MAC`` the hex HMAC-SHA256, under the job's key, of the direction
(``c`` from a host, ``s`` from the coordinator), the challenge's nonce and ``BODY``. So a line proves the job's
secret without carrying it, cannot be replayed on another connection (a fresh nonce each), nor again or out of
order on the same one (``seq``), nor reflected back (the direction).

The key is derived from ``MALAUNCH_JOB_SECRET``; a shim without one uses the job's name, which keeps out
whatever does not know the name (another job, a stray client) but not someone who does (docs/recovery.md).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from typing import Any, Dict, Mapping, Optional

__all__ = ["MAX_LINE", "Channel", "WireError", "challenge", "job_key", "read_challenge"]

#: The longest line either side accepts (bytes, newline included); a longer one ends the connection.
MAX_LINE = 4096
VERSION = 1
_KEY_LABEL = b"malaunch-coordinator-v1\0"


class WireError(ValueError):
    """A line that is not the job's: malformed, too long, unproved, replayed or out of order."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind  # malformed, oversized, bad_mac, replay, version


def job_key(secret: str) -> bytes:
    """The HMAC key of a job from its secret (or its name, see the module's docstring)."""
    return hashlib.sha256(_KEY_LABEL + secret.encode("utf-8", "surrogateescape")).digest()


def challenge() -> Dict[str, Any]:
    """A fresh challenge for a new connection (the coordinator sends it first)."""
    return {"t": "challenge", "v": VERSION, "nonce": secrets.token_hex(16)}


def read_challenge(line: bytes) -> str:
    """The nonce of a challenge line. Raises :class:`WireError`."""
    data = _json(line)
    nonce = data.get("nonce")
    if data.get("t") != "challenge" or not isinstance(nonce, str) or not 16 <= len(nonce) <= 64:
        raise WireError("malformed", "expected the coordinator's challenge")
    if data.get("v") != VERSION:
        raise WireError("version", f"coordinator speaks version {data.get('v')!r}, this shim {VERSION}")
    return nonce


class Channel:
    """One side of one connection: seals what it sends, opens (checks) what it receives."""

    def __init__(self, key: bytes, nonce: str, side: str) -> None:
        if side not in ("c", "s"):
            raise ValueError(f"side must be 'c' or 's', not {side!r}")
        self._key, self._nonce = key, nonce.encode("ascii")
        self._mine, self._theirs = side.encode(), (b"s" if side == "c" else b"c")
        self._sent = 0
        self._received = 0

    def _mac(self, side: bytes, body: bytes) -> str:
        return hmac.new(self._key, side + b"|" + self._nonce + b"|" + body, hashlib.sha256).hexdigest()

    def seal(self, payload: Mapping[str, Any]) -> bytes:
        """The line for ``payload`` (a JSON object whose ``t`` names its type)."""
        body = json.dumps({**payload, "seq": self._sent}, separators=(",", ":"), sort_keys=True).encode()
        self._sent += 1
        line = self._mac(self._mine, body).encode() + b" " + body + b"\n"
        if len(line) > MAX_LINE:
            raise WireError("oversized", f"a {payload.get('t')!r} message of {len(line)} bytes")
        return line

    def open(self, line: bytes) -> Dict[str, Any]:
        """The payload of a received line. Raises :class:`WireError` (the connection is then closed)."""
        if len(line) > MAX_LINE:
            raise WireError("oversized", f"{len(line)} bytes")
        mac, _, body = line.rstrip(b"\r\n").partition(b" ")
        if len(mac) != 64 or not body:
            raise WireError("malformed", "not 'MAC BODY'")
        if not hmac.compare_digest(mac, self._mac(self._theirs, body).encode()):
            raise WireError("bad_mac", "the proof does not match the job's secret")
        data = _json(body)
        if data.get("seq") != self._received:
            raise WireError("replay", f"sequence {data.get('seq')!r}, expected {self._received}")
        self._received += 1
        if not isinstance(data.get("t"), str):
            raise WireError("malformed", "no message type")
        return data


def _json(raw: bytes) -> Dict[str, Any]:
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise WireError("malformed", str(error)[:80]) from None
    if not isinstance(data, dict):
        raise WireError("malformed", "not a JSON object")
    return data


def text(value: object, limit: int = 300) -> Optional[str]:
    """A received string field, shortened; None when it is not a string."""
    if not isinstance(value, str):
        return None
    return value if len(value) <= limit else value[: limit - 3] + "..."
