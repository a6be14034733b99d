"""The checks a job file's values go through, shared by the spec and by each backend's own section.

Each raises :class:`~malaunch.sdk.errors.SpecError` naming the field's path, the value and what to do, so a
backend's section (``<backend>/options.py``) reports a bad value exactly as the spec's own fields do.
"""

from __future__ import annotations

import difflib
import re
from typing import Optional, Sequence, Tuple

from ..errors import SpecError

__all__ = ["check_int", "check_pattern", "check_text", "check_words", "fail", "one_of", "unknown_field"]


def fail(path: str, problem: str, value: object, hint: str = "fix the job file") -> SpecError:
    """The error for field ``path``: ``problem`` with ``value``; ``hint`` says what to do."""
    return SpecError(path, problem, value, hint)


def check_int(path: str, value: object, minimum: int, maximum: Optional[int] = None) -> None:
    """A whole number (not a bool) from ``minimum`` to ``maximum`` (None: no upper bound)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(path, "must be a whole number", value)
    if value < minimum:
        raise fail(path, f"must be >= {minimum}", value)
    if maximum is not None and value > maximum:
        raise fail(path, f"must be <= {maximum}", value)


def check_text(path: str, value: object, optional: bool = False) -> None:
    """A non-blank string without NUL characters (or None when ``optional``)."""
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise fail(path, "must be a string", value)
    if not value.strip():
        raise fail(path, "must not be empty", value)
    if "\x00" in value:
        raise fail(path, "must not contain NUL characters", value)


def check_words(path: str, value: object) -> None:
    """A tuple of strings without NUL characters."""
    if not isinstance(value, tuple):
        raise fail(path, "must be a list of strings", value)
    for index, word in enumerate(value):
        if not isinstance(word, str) or "\x00" in word:
            raise fail(f"{path}[{index}]", "must be a string", word)


def check_pattern(path: str, value: object, pattern: re.Pattern[str], what: str) -> None:
    """None, or a string that ``pattern`` matches (``what`` says in words what it must be)."""
    if value is not None and (not isinstance(value, str) or not pattern.match(value)):
        raise fail(path, f"must be {what}", value)


def one_of(path: str, value: object, choices: Tuple[str, ...]) -> None:
    """One of the words ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise fail(path, f"must be one of {', '.join(choices)}", value)


def unknown_field(path: str, key: object, known: Sequence[str]) -> SpecError:
    """The error for a key ``key`` that is none of ``known`` at ``path`` (the key's own path): a did-you-mean when
    one known field is spelt nearly so (``evnets``: ``events``), else the known fields, as the job file's own
    sections say it."""
    word = str(key).lower()
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}?" if close else f"known fields: {', '.join(known)}"
    return fail(path, "unknown field", key, hint)
