"""Choosing job output lines for ``ma-submit logs``: by host, by rank, the last N; the same for every backend.

Backends yield lines whose one prefix names their host and writer (``[host 1 rank 3] ...``, ``[host 1
ma-entrypoint] ...``; :mod:`.backends.lineprefix` makes and reads it). A line of a launcher's that names a rank
itself (torchrun's ``[rank3]:``, msrun's ``[rank 2]`` after its ``[host 0 msrun] ``) counts as that rank's.
:func:`select_lines` filters a finished stream; :func:`view_logs` also follows one, printing the last N lines first
and then only new ones.
"""

from __future__ import annotations

import collections
import re
from typing import Callable, Dict, FrozenSet, Iterable, Iterator, NamedTuple, Optional

from .backends.lineprefix import parse_line

__all__ = ["LogQuery", "line_host", "line_rank", "select_lines", "view_logs"]

_SAID_RANK = re.compile(r"\[rank ?(\d+)\]")  # a rank named at the start of a line's text (torchrun's, msrun's)


def line_host(line: str) -> Optional[int]:
    """The host a line's prefix names, or None."""
    return parse_line(line).host


def line_rank(line: str) -> Optional[int]:
    """The rank that wrote a line (its prefix's, else one its text starts by naming), or None."""
    parsed = parse_line(line)
    if parsed.rank is not None:
        return parsed.rank
    match = _SAID_RANK.match(parsed.text)
    return int(match.group(1)) if match else None


class LogQuery(NamedTuple):
    """Which lines to show: only these ``hosts`` / ``ranks`` (empty: all), and the last ``tail`` of them."""

    hosts: FrozenSet[int] = frozenset()
    ranks: FrozenSet[int] = frozenset()
    tail: Optional[int] = None

    def keeps(self, line: str) -> bool:
        """True when ``line`` passes the host and rank filters."""
        if self.hosts and line_host(line) not in self.hosts:
            return False
        return not self.ranks or line_rank(line) in self.ranks


def select_lines(lines: Iterable[str], query: LogQuery) -> Iterator[str]:
    """The lines of a finished stream that ``query`` keeps (the last ``query.tail`` of them)."""
    kept = (line for line in lines if query.keeps(line))
    if query.tail is None:
        yield from kept
    else:
        yield from collections.deque(kept, maxlen=query.tail)


def view_logs(logs: Callable[[bool], Iterator[str]], query: LogQuery, follow: bool) -> Iterator[str]:
    """Lines of ``logs(follow)`` chosen by ``query``. Following with a tail prints the last lines written so
    far, then follows and skips, per host, the lines already read (each host's lines keep their order)."""
    if not follow:
        yield from select_lines(logs(False), query)
        return
    if query.tail is None:
        yield from (line for line in logs(True) if query.keeps(line))
        return
    seen: Dict[Optional[int], int] = collections.Counter()
    earlier = []
    for line in logs(False):
        seen[line_host(line)] += 1
        earlier.append(line)
    yield from select_lines(earlier, query)
    for line in logs(True):
        host = line_host(line)
        if seen[host] > 0:
            seen[host] -= 1
            continue
        if query.keeps(line):
            yield line
