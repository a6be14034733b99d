"""The environment contract as one table: every variable the shim reads or sets, and how to parse it.

Each :class:`Variable` row says what the variable means, its kind (how its text is read), its bounds and default,
its aliases, which way it goes (``input``: the shim reads it; ``output``: the shim sets it in the processes it
starts; ``both``), who may set it (``platform``, ``sdk``, ``user`` through the job's ``env``/options, ``shim``) and
the job-file field the SDK fills it from (``sdk_field``; ``""`` for a variable the backend sets itself).
The rows are in :mod:`.variables`; ``docs/entrypoint.md``'s tables and this one are checked against each other by
``tests/entrypoint/contract/test_contract.py``. Every variable the shim reads is parsed here, once, by
:func:`~.config.parse_shim_config` into the :class:`~.config.ShimConfig` the rest of the shim receives; the SDK
imports names (:class:`Name`, ``spec.RESERVED_ENV``, its launcher rows) and bounds from here instead of spelling
them.

The parse helpers read a variable the way :mod:`~malaunch.entrypoint.contract.cluster_env` does (same rules, same
:class:`~malaunch.entrypoint.contract.errors.ConfigError` messages): the value is stripped and an empty value counts as
unset; numbers are ASCII digits only (``-?[0-9]+``, at most 9 digits; seconds ``[0-9]+(.[0-9]+)?``), so ``1_0``,
``+3`` and full-width digits are refused although ``int()`` takes them.

Standard library only, and cheap to import: it is read before the first rank starts.
"""

from __future__ import annotations

import shlex
from typing import Mapping, Optional, Tuple, Union

from .errors import ConfigError
from .variables import ALIASES, KINDS, ROLES, SETTERS, VARIABLES, Name, Variable

__all__ = [
    "ALIASES",
    "KINDS",
    "Name",
    "ROLES",
    "SETTERS",
    "VARIABLES",
    "Variable",
    "int_bounds",
    "parse_bool",
    "parse_choice",
    "parse_codes",
    "parse_int",
    "parse_seconds",
    "parse_words",
    "raw_value",
    "seconds_bounds",
    "seconds_default",
]

_MAX_DIGITS = 9
_ASCII_DIGITS = frozenset("0123456789")
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def raw_value(environ: Mapping[str, str], name: str) -> Optional[str]:
    """The variable's text, stripped; ``None`` when it is unset or blank."""
    value = environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def _digits(text: str) -> bool:
    return 0 < len(text) <= _MAX_DIGITS and _ASCII_DIGITS.issuperset(text)


def _row(name: str, kinds: Tuple[str, ...]) -> Variable:
    row = VARIABLES[ALIASES.get(name, name)]  # an alias is read with its row's kind, bounds and default
    if row.kind not in kinds:
        raise TypeError(f"{name} is a {row.kind} variable, not {' or '.join(kinds)}")
    return row


def int_bounds(name: str) -> Tuple[int, Optional[int]]:
    """The bounds of a whole-number variable: ``(minimum, maximum)``, maximum ``None`` when unbounded above."""
    row = _row(name, ("int", "port"))
    minimum, maximum = row.minimum, row.maximum
    if not isinstance(minimum, int) or not (maximum is None or isinstance(maximum, int)):
        raise TypeError(f"{name} has no whole-number bounds")
    return minimum, maximum


def seconds_bounds(name: str) -> Tuple[float, float]:
    """The bounds of a seconds variable: ``(minimum, maximum)``, both set."""
    row = _row(name, ("seconds",))
    if row.minimum is None or row.maximum is None:
        raise TypeError(f"{name} has no bounds in the contract table")
    return float(row.minimum), float(row.maximum)


def seconds_default(name: str) -> float:
    """The default of a seconds variable, as the table has it."""
    row = _row(name, ("seconds",))
    if isinstance(row.default, bool) or not isinstance(row.default, (int, float)):
        raise TypeError(f"{name} has no default in the contract table")
    return float(row.default)


def parse_int(environ: Mapping[str, str], name: str) -> int:
    """A whole-number (or port) variable within its row's bounds; its default when unset.

    Raises:
        ConfigError: not ASCII digits, too long, or out of bounds (the message cluster_env gives).
    """
    row = _row(name, ("int", "port"))
    raw = raw_value(environ, name)
    if raw is None:
        if not isinstance(row.default, int):
            raise TypeError(f"{name} has no whole-number default")
        return row.default
    minimum, maximum = row.minimum, row.maximum
    bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
    unsigned = raw[1:] if raw.startswith("-") else raw
    if not _digits(unsigned):
        raise ConfigError(name, raw, f"expected a whole number {bound}, in ASCII digits (0-9)")
    value = int(raw, 10)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ConfigError(name, raw, f"expected a whole number {bound}")
    return value


def parse_seconds(environ: Mapping[str, str], name: str) -> float:
    """A number of seconds (``digits[.digits]``) within its row's bounds; its default when unset.

    Raises:
        ConfigError: not a plain ASCII decimal (``1e3``, ``inf``, full-width digits), or outside the row's bounds.
    """
    row = _row(name, ("seconds",))
    raw = raw_value(environ, name)
    if raw is None:
        return float(row.default) if isinstance(row.default, (int, float)) else 0.0
    whole, _, fraction = raw.partition(".")
    if not _digits(whole) or ("." in raw and not (fraction and _ASCII_DIGITS.issuperset(fraction))):
        raise ConfigError(name, raw, "expected a finite number of seconds >= 0 in ASCII digits, e.g. 30 or 2.5")
    value = float(raw)
    too_low = row.minimum is not None and value < row.minimum
    if too_low or (row.maximum is not None and value > row.maximum):
        raise ConfigError(name, raw, f"expected seconds between {row.minimum} and {row.maximum}")
    return value


def parse_bool(environ: Mapping[str, str], name: str) -> bool:
    """``True``/``False`` (also 1/0, yes/no, on/off, any case); its default when unset.

    Raises:
        ConfigError: any other value.
    """
    row = _row(name, ("bool",))
    raw = raw_value(environ, name)
    if raw is None:
        return bool(row.default)
    lowered = raw.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(name, raw, "expected True or False")


def parse_choice(environ: Mapping[str, str], name: str) -> str:
    """One of the row's ``choices`` (case-insensitive, returned in lower case); ``""`` when unset.

    Raises:
        ConfigError: any other value.
    """
    row = _row(name, ("choice",))
    raw = raw_value(environ, name)
    if raw is None:
        return ""
    word = raw.lower()
    if word not in row.choices:
        raise ConfigError(name, raw, f"expected one of {', '.join(row.choices)}, or unset for the platform default")
    return word


def parse_words(environ: Mapping[str, str], name: str) -> Tuple[str, ...]:
    """A ``words`` variable split the way a shell would (quotes kept together); ``()`` when unset.

    Raises:
        ConfigError: unbalanced quotes.
    """
    _row(name, ("words",))
    raw = raw_value(environ, name)
    if raw is None:
        return ()

    try:
        return tuple(shlex.split(raw))
    except ValueError as exc:
        raise ConfigError(name, raw, f"expected shell-style words ({exc}); check the quotes") from None


def parse_codes(environ: Mapping[str, str], name: str) -> Union[str, Tuple[int, ...]]:
    """A ``codes`` variable: one of the row's ``choices`` (lower case) or exit codes 1-255 in ASCII digits.

    Raises:
        ConfigError: neither a choice nor comma-separated exit codes, or a code out of 1-255.
    """
    row = _row(name, ("codes",))
    raw = raw_value(environ, name)
    if raw is None:
        return str(row.default)
    word = raw.lower()
    if word in row.choices:
        return word
    codes = []
    for part in word.split(","):
        text = part.strip()
        if not _digits(text[1:] if text.startswith("-") else text):
            choices = ", ".join(row.choices)
            raise ConfigError(name, environ[name], f"expected {choices} or comma-separated exit codes (1,137)")
        code = int(text, 10)
        if not 1 <= code <= 255:
            raise ConfigError(name, environ[name], "expected exit codes between 1 and 255")
        codes.append(code)
    return tuple(codes)
