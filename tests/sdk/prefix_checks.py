"""What a job's merged output line must be on every backend: exactly one prefix, naming its host and its writer
(``[host 1 rank 2] ``, ``[host 1 ma-entrypoint] ``, ``[host 1] `` for a line no prefix came with).

Written here on its own (not with the SDK's parser), so a test checks the lines against the rule, not against the
code that makes them."""

from __future__ import annotations

import re
from typing import Iterable, List, NamedTuple, Optional

WRITER = r"rank \d+|local rank \d+|ma-entrypoint|ma-submit|prepare|torchrun|msrun|ms-scheduler|ranktable|single|boot"
_ONE = re.compile(rf"\[host (\d+)(?: ({WRITER}))?\] (.*)", re.S)
_ANOTHER = re.compile(rf"\[(?:host \d+[^\]]*|{WRITER})\] ")


class Written(NamedTuple):
    host: int
    writer: Optional[str]
    text: str


def one_prefix(lines: Iterable[str]) -> List[Written]:
    """Each line's host, writer and text; fails on a line with no such prefix, or with a second one."""
    found = []
    for line in lines:
        match = _ONE.fullmatch(line)
        assert match is not None, f"no '[host N ...] ' prefix: {line!r}"
        assert _ANOTHER.match(match.group(3)) is None, f"two prefixes: {line!r}"
        found.append(Written(int(match.group(1)), match.group(2), match.group(3)))
    return found
