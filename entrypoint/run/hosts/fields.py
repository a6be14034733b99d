"""Typed reads of a coordinator message's fields (:mod:`.messages` parses every message with them). Pure.

A field of the wrong type raises :class:`~.wire.WireError` (kind ``malformed``) naming the message, the field and
the value, shortened.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Tuple

from .wire import WireError, text

__all__ = ["Fields", "is_int", "malformed"]


class Fields:
    """Typed reads of one JSON object's fields; a field absent (or null, where null is allowed) is its default."""

    def __init__(self, data: Mapping[str, Any], where: str) -> None:
        self.data, self.where = data, where

    def raw(self, name: str) -> object:
        return self.data.get(name)

    def whole(self, name: str, default: Optional[int] = None) -> int:
        value = self.data.get(name, default)
        if not is_int(value):
            raise malformed(self.where, f"{name!r} is not an integer", value)
        assert isinstance(value, int)
        return value

    def opt_whole(self, name: str) -> Optional[int]:
        value = self.data.get(name)
        if value is not None and not is_int(value):
            raise malformed(self.where, f"{name!r} is not an integer", value)
        return value

    def number(self, name: str) -> float:
        value = self.data.get(name, 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise malformed(self.where, f"{name!r} is not a number", value)
        return float(value)

    def flag(self, name: str) -> bool:
        value = self.data.get(name, False)
        if not isinstance(value, bool):
            raise malformed(self.where, f"{name!r} is not true or false", value)
        return value

    def string(self, name: str) -> str:
        value = self.data.get(name, "")
        if not isinstance(value, str):
            raise malformed(self.where, f"{name!r} is not a string", value)
        return value

    def opt_string(self, name: str, limit: Optional[int] = None) -> Optional[str]:
        value = self.data.get(name)
        if value is not None and not isinstance(value, str):
            raise malformed(self.where, f"{name!r} is not a string", value)
        return text(value, limit) if value is not None and limit is not None else value

    def lines(self, name: str) -> Tuple[str, ...]:
        value = self.data.get(name, [])
        if not isinstance(value, list) or not all(isinstance(line, str) for line in value):
            raise malformed(self.where, f"{name!r} is not a list of strings", value)
        return tuple(value)

def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def malformed(where: str, what: str, value: object) -> WireError:
    shown = repr(value)
    return WireError("malformed", f"{where} {what}: {shown if len(shown) <= 60 else shown[:57] + '...'}")
