"""JSON on the shim's start-up path: json's own C scanner, driven part by part, and the plan's indented text.

- :func:`loads` decodes with the same C scanner :func:`json.loads` runs (``_json.make_scanner``), with the same
  rules around it: a leading BOM refused, whitespace skipped on both sides, "Expecting value" and "Extra data".
  It gives the same values, and on bad input raises the same :class:`json.JSONDecodeError`.
- :func:`scan` decodes the one JSON value that starts at a given index of a text, and says where it ends.
- :func:`quoted` writes one string as json does (non-ASCII escaped).
- :func:`dumps_indented` writes what ``json.dumps(value, indent=2)`` writes, for the values a plan holds (dicts with
  string keys, lists, tuples, strings, ints, floats, booleans, None); any other value is handed to :mod:`json`.

Where the interpreter has no ``_json`` accelerator, both are :mod:`json` itself.
"""

from __future__ import annotations

import json
from json import JSONDecodeError
from json.encoder import encode_basestring_ascii
from typing import Any, Callable, NoReturn

try:
    import _json
except ImportError:  # an interpreter without the accelerator
    _json = None  # type: ignore[assignment]

__all__ = ["dumps_indented", "loads", "quoted", "scan"]

_SPACE = " \t\n\r"  # JSON's whitespace
_INFINITY = float("inf")
_CONSTANTS = {"-Infinity": -_INFINITY, "Infinity": _INFINITY, "NaN": float("nan")}
_BOM = "\ufeff"


class _Rules:
    """What the C scanner reads from its context: json.JSONDecoder's defaults, but how integers are read."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_constant = _CONSTANTS.__getitem__

    def __init__(self, integer: Callable[[str], Any]) -> None:
        vars(self)["parse_int"] = integer  # the name the scanner reads (json's own keyword)


def _fail(message: str, text: str, position: int) -> NoReturn:
    raise JSONDecodeError(message, text, position)


def loads(text: str, integer: Callable[[str], Any] = int) -> Any:
    """``json.loads(text, parse_int=integer)``.

    Raises:
        json.JSONDecodeError: ``text`` is not one JSON value (with whitespace around it).
    """
    if _json is None:
        return json.loads(text, parse_int=integer)
    if text.startswith(_BOM):
        _fail("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    start = len(text) - len(text.lstrip(_SPACE))
    try:
        value, end = _json.make_scanner(_Rules(integer))(text, start)  # type: ignore[arg-type]
    except StopIteration as stop:
        _fail("Expecting value", text, stop.value)
    except SystemError:
        # Python 3.10 and 3.11's scanner raises its JSONDecodeError only when json.decoder is already imported
        # (it fails with this instead): bad input only, which json itself now reads again to raise its own error.

        return json.loads(text, parse_int=integer)
    if end != len(text):
        end = len(text) - len(text[end:].lstrip(_SPACE))
        if end != len(text):
            _fail("Extra data", text, end)
    return value


def scan(text: str, index: int, integer: Callable[[str], Any] = int) -> tuple[Any, int]:
    """The JSON value that starts at ``text[index]`` (no whitespace before it) and the index just after it, as
    ``json.JSONDecoder(parse_int=integer).raw_decode(text, index)`` gives them.

    Raises:
        json.JSONDecodeError: no valid JSON value starts there.
    """
    if _json is not None:
        try:
            found: tuple[Any, int] = _json.make_scanner(_Rules(integer))(text, index)  # type: ignore[arg-type]
            return found
        except StopIteration as stop:
            _fail("Expecting value", text, stop.value)
        except SystemError:  # Python 3.10 and 3.11 on bad input, as in loads: json itself raises the error
            pass

    decoded: tuple[Any, int] = json.JSONDecoder(parse_int=integer).raw_decode(text, index)
    return decoded


def quoted(text: str) -> str:
    """``text`` as a JSON string, non-ASCII characters escaped (as json writes it by default)."""
    if _json is None:
        return encode_basestring_ascii(text)
    return _json.encode_basestring_ascii(text)


class _Unsupported(Exception):
    """A value :func:`_indented` does not write the way json does: json writes the whole value instead."""


def dumps_indented(value: object) -> str:
    """``json.dumps(value, indent=2)``."""
    if _json is not None:
        try:
            return _indented(value, "\n")
        except _Unsupported:
            pass

    return json.dumps(value, indent=2)


def _number(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (_INFINITY, -_INFINITY):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _indented(value: object, newline: str) -> str:
    """``value`` as json.dumps(indent=2) writes it; ``newline`` is a line break and the current indentation."""
    if isinstance(value, str):
        return _json.encode_basestring_ascii(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _number(value)
    inner = newline + "  "
    if isinstance(value, dict):
        if not value:
            return "{}"
        if not all(isinstance(key, str) for key in value):
            raise _Unsupported  # json turns other keys into text its own way
        items = [f"{_json.encode_basestring_ascii(key)}: {_indented(item, inner)}" for key, item in value.items()]
        return "{" + inner + ("," + inner).join(items) + newline + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        return "[" + inner + ("," + inner).join(_indented(item, inner) for item in value) + newline + "]"
    raise _Unsupported
