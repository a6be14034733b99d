"""Durations and sizes as people type and read them: ``90s``, ``30m``, ``12h``, ``7d``, ``2w``; ``1.2 MB``.

One home for both, used by the job file (``keep_for``), ``ma-submit list``/``prune`` and the local backend's notes.
"""

from __future__ import annotations

import re

__all__ = ["binary_size_text", "parse_duration", "size_text"]

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*\Z")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``12h``, ``7d``, ``2w`` -> seconds; raises ``ValueError``."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration like 90s, 30m, 12h, 7d or 2w")
    return float(match.group(1)) * _UNITS[match.group(2)]


def size_text(size: int) -> str:
    """``512 B``, ``3.0 KB``, ``1.2 MB``, ``4.5 GB`` (powers of 1024)."""
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def binary_size_text(count: int) -> str:
    """A byte count for people: ``512 B``, ``3.4 KiB``, ``1.2 MiB``, ``2.0 GiB`` (never ``0.0 MiB``)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"
