"""Gitignore-syntax patterns (``.malaunchignore``), matched the way git matches ``.gitignore``.

Rules: blank lines and ``#`` comments are skipped (``\\#`` is a literal ``#``); trailing spaces are dropped unless
escaped; ``!pattern`` re-includes what an earlier pattern excluded; a trailing ``/`` matches folders only; a
pattern with a ``/`` at its start or middle is anchored at the top folder, otherwise it matches a name at any
depth; ``*`` and ``?`` never match ``/``; ``[...]`` is a character class (``[!...]`` negated); ``**/`` matches
any number of folders, ``/**`` everything inside. The last pattern that matches decides. A file below an
excluded folder stays excluded even when a later ``!`` pattern names it, as in git: the folder is never entered.
"""

from __future__ import annotations

import re
from typing import List, Optional, Pattern, Sequence, Tuple

__all__ = ["IgnoreRules"]


def _class(pattern: str, start: int) -> Tuple[Optional[str], int]:
    """The regex for the ``[...]`` class opening at ``start`` and the index after it; (None, start) if unclosed."""
    end = start + 1
    if end < len(pattern) and pattern[end] in "!^":
        end += 1
    if end < len(pattern) and pattern[end] == "]":
        end += 1
    while end < len(pattern) and pattern[end] != "]":
        end += 1
    if end >= len(pattern):
        return None, start
    body = pattern[start + 1 : end]
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    body = body.replace("\\", "\\\\").replace("^", "\\^")
    return ("[^/" if negate else "[") + body + "]", end + 1


def _glob_regex(glob: str) -> str:
    """Regex text for one slash-separated glob (no anchoring)."""
    out: List[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**/", i) and (i == 0 or glob[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i) and (i == 0 or glob[i - 1] == "/") and i + 2 == len(glob):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            regex, after = _class(glob, i)
            out.append(regex if regex is not None else re.escape(char))
            i = after if regex is not None else i + 1
        elif char == "\\" and i + 1 < len(glob):
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def _strip_trailing_spaces(line: str) -> str:
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        return stripped[:-1] + " "
    return stripped


class IgnoreRules:
    """Compiled patterns; :meth:`ignored` answers for one path relative to the top folder."""

    def __init__(self, lines: Sequence[str]) -> None:
        self._rules: List[Tuple[Pattern[str], bool, bool]] = []  # (regex, negated, folders only)
        for raw in lines:
            line = _strip_trailing_spaces(raw.rstrip("\r\n"))
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            if negated or line.startswith("\\#") or line.startswith("\\!"):
                line = line[1:]
            folders_only = line.endswith("/")
            line = line.rstrip("/")
            if not line:
                continue
            anchored = "/" in line
            line = line.lstrip("/")
            body = _glob_regex(line)
            regex = ("^" if anchored else "^(?:.*/)?") + body + "$"
            self._rules.append((re.compile(regex, re.S), negated, folders_only))

    def ignored(self, relpath: str, *, is_dir: bool = False) -> bool:
        """Whether ``relpath`` (``/``-separated, relative to the top folder) is excluded by the last match."""
        verdict = False
        for regex, negated, folders_only in self._rules:
            if folders_only and not is_dir:
                continue
            if regex.match(relpath):
                verdict = not negated
        return verdict
