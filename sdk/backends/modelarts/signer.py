"""AK/SK request signing, ``SDK-HMAC-SHA256``, as Huawei Cloud's API gateway checks it.

Pure functions of their inputs (the time is an argument). The steps: canonical request = method, the
percent-encoded path with a trailing ``/``, the sorted and encoded query, the signed headers (every header
whose name has no ``_``, lower-cased, sorted, ``name:value`` lines ending in a newline), their names joined
by ``;``, and the hex SHA-256 of the body; string to sign = algorithm, ``X-Sdk-Date``, hex SHA-256 of the
canonical request; signature = hex HMAC-SHA256 keyed with the secret key. The tests compare the result with
``huaweicloudsdkcore``'s ``Signer`` byte for byte.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Dict, Mapping, Sequence, Tuple
from urllib.parse import quote, unquote

__all__ = ["ALGORITHM", "DATE_HEADER", "canonical_query", "canonical_request", "sdk_date", "sign_request"]

ALGORITHM = "SDK-HMAC-SHA256"
DATE_HEADER = "X-Sdk-Date"
_CONTENT_HASH_HEADER = "x-sdk-content-sha256"
_EMPTY_HASH = hashlib.sha256(b"").hexdigest()


def _encode(text: str) -> str:
    return quote(text, safe="~")


def sdk_date(now: float) -> str:
    """``X-Sdk-Date`` for ``now`` (seconds since the epoch): ``YYYYmmddTHHMMSSZ`` in UTC."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))


def canonical_query(query: Sequence[Tuple[str, str]]) -> str:
    """Sorted ``key=value`` pairs, both percent-encoded (RFC 3986), joined by ``&``; also the sent query."""
    return "&".join(f"{_encode(key)}={_encode(value)}" for key, value in sorted(query))


def _canonical_path(path: str) -> str:
    encoded = "/".join(_encode(segment) for segment in unquote(path).split("/"))
    return encoded if encoded.endswith("/") else encoded + "/"


def canonical_request(
    method: str, path: str, query: Sequence[Tuple[str, str]], headers: Mapping[str, str], body: bytes
) -> Tuple[str, str]:
    """The canonical request and the signed-header list (``a;b;c``)."""
    values: Dict[str, str] = {}
    for name, value in headers.items():
        values[name.lower()] = str(value).strip()
    signed = sorted(name.lower() for name in headers if "_" not in name)
    lines = "".join(f"{name}:{values[name]}\n" for name in signed)
    payload = values.get(_CONTENT_HASH_HEADER) or hashlib.sha256(body).hexdigest() if body else _EMPTY_HASH
    text = "\n".join([method.upper(), _canonical_path(path), canonical_query(query), lines, ";".join(signed), payload])
    return text, ";".join(signed)


def sign_request(
    method: str,
    path: str,
    query: Sequence[Tuple[str, str]],
    headers: Mapping[str, str],
    body: bytes,
    *,
    ak: str,
    sk: str,
) -> str:
    """The ``Authorization`` header value; ``headers`` must hold ``X-Sdk-Date`` and ``Host`` already."""
    request, signed = canonical_request(method, path, query, headers, body)
    date = next(value for name, value in headers.items() if name.lower() == DATE_HEADER.lower())
    digest = hashlib.sha256(request.encode("utf-8")).hexdigest()
    string_to_sign = f"{ALGORITHM}\n{date}\n{digest}"
    signature = hmac.new(sk.encode("utf-8"), string_to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    return f"{ALGORITHM} Access={ak}, SignedHeaders={signed}, Signature={signature}"
