"""An elastic attempt's hosts as a start message carries them: ranges, or a packed bitmap when ranges would
not fit a wire line (thousands of hosts lost here and there). Pure."""

from __future__ import annotations

import base64
import binascii
import zlib
from typing import List, Optional, Tuple

__all__ = ["members_text", "read_members"]

_PACKED = "z:"  # members as a bitmap (bit i: host i), zlib-packed, in base64
_RANGES_MAX = 2000  # longer ranges (hosts lost here and there) travel packed
_PACKED_MAX = 3000  # 16,384 hosts in no order at all: 2,048 bytes that do not pack, 2,750 characters
_BITMAP_MAX = 2048  # bytes: MA_NUM_HOSTS is at most 16,384


def members_text(members: Tuple[int, ...]) -> str:
    """Host indexes as ranges (``0-3,5``), or packed (``z:...``) when the ranges would be long (hosts lost here
    and there): a start message stays within a wire line however many hosts the job has."""
    runs: List[List[int]] = []
    for host in sorted(set(members)):
        if runs and runs[-1][1] == host - 1:
            runs[-1][1] = host
        else:
            runs.append([host, host])
    joined = ",".join(str(low) if low == high else f"{low}-{high}" for low, high in runs)
    if len(joined) <= _RANGES_MAX:
        return joined

    bits = bytearray((max(members) >> 3) + 1)
    for host in members:
        bits[host >> 3] |= 1 << (host & 7)
    return _PACKED + base64.b64encode(zlib.compress(bytes(bits), 9)).decode("ascii")


def read_members(value: object) -> Optional[Tuple[int, ...]]:
    """The hosts of :func:`members_text`'s text; None when it is not one."""
    if isinstance(value, str) and value.startswith(_PACKED) and len(value) <= _PACKED_MAX:
        return _unpack(value[len(_PACKED) :])
    if not isinstance(value, str) or not value or len(value) > _RANGES_MAX:
        return None
    found: List[int] = []
    for part in value.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or not (high.isdigit() or not high):
            return None
        first, last = int(low), int(high or low)
        if last < first or last - first > 100000:
            return None
        found += range(first, last + 1)
    return tuple(sorted(set(found)))


def _unpack(packed: str) -> Optional[Tuple[int, ...]]:
    try:
        unpacker = zlib.decompressobj()
        bits = unpacker.decompress(base64.b64decode(packed, validate=True), _BITMAP_MAX + 1)
    except (binascii.Error, ValueError, zlib.error):
        return None
    if len(bits) > _BITMAP_MAX or unpacker.unconsumed_tail or not unpacker.eof:
        return None
    found = tuple(index * 8 + bit for index, byte in enumerate(bits) for bit in range(8) if byte >> bit & 1)
    return found or None
