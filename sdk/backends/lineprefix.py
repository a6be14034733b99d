"""A job's output line and its one prefix, the same on every backend: who wrote it, on which host.

A shim's console line carries one prefix, naming its writer: ``[rank 2] `` (a rank; ``[local rank 0] `` for a
torchrun worker whose rank is not known yet), ``[ma-entrypoint] `` (the shim itself), ``[torchrun] ``,
``[msrun] `` (the launcher's own output), ``[prepare] `` (the job's prepare steps), ``[boot] `` (a single run's
process). A backend merges its hosts' consoles into one stream and names each line's host inside that prefix, so
a line still carries exactly one:

- ``[host 1 rank 2] all_reduce ...``: a rank's line names its rank and its host;
- ``[host 1 ma-entrypoint] exit code 0; ...``: the shim's own line (or a launcher's, ``[host 1 torchrun] ``);
- ``[host 1] ...``: a line no prefix came with (a pod that does not run the shim, a launcher writing around it);
- ``[host 1 ma-submit] ...``: the SDK's own note in a host's place (bytes a log preview skipped, ...).

A sweep names its trial the same way: ``[trial 3 host 1 rank 2] ...`` (``[trial 3] ...`` for a line of its own).

:func:`host_line` makes a merged line from a line as a host's console gave it, :func:`prefixed` one from its
parts, :func:`trial_line` adds a sweep's trial; :func:`parse_line` reads any of them back (and a shim's own line,
which names no host). ``ma-submit logs``' filters, a sweep's objective and the page's log view read them so.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional

__all__ = ["SDK_WRITER", "SHIM_WRITERS", "LinePrefix", "host_line", "parse_line", "prefixed", "trial_line"]

#: The writers a shim names in its console prefix besides a rank: itself, the launchers and their processes.
SHIM_WRITERS = ("ma-entrypoint", "prepare", "torchrun", "msrun", "ms-scheduler", "ranktable", "single", "boot")
#: The writer of a line the SDK writes in a host's place.
SDK_WRITER = "ma-submit"

_WRITER = r"rank \d+|local rank \d+|" + "|".join(re.escape(name) for name in (*SHIM_WRITERS, SDK_WRITER))
_SHIM = re.compile(rf"\[({_WRITER})\] ")
_MERGED = re.compile(rf"\[(?:trial (\d+) )?host (\d+)(?: ({_WRITER}))?\] ")
_TRIAL = re.compile(r"\[trial (\d+)\] ")
_RANK = re.compile(r"rank (\d+)")


class LinePrefix(NamedTuple):
    """A line read back: its ``trial`` (a sweep's), ``host`` and ``writer`` (``rank 2``, ``ma-entrypoint``; None when
    unknown), the ``rank`` that wrote it (None when no rank did) and its ``text`` after the prefix."""

    trial: Optional[int]
    host: Optional[int]
    writer: Optional[str]
    rank: Optional[int]
    text: str


def prefixed(host: int, text: str, writer: Optional[str] = None) -> str:
    """``text`` as host ``host``'s line by ``writer`` (``rank 2``, ``ma-entrypoint``; None: no one named)."""
    return f"[host {host} {writer}] {text}" if writer else f"[host {host}] {text}"


def host_line(host: int, line: str) -> str:
    """A line of host ``host``'s console with the host named in its one prefix: the shim's ``[rank 2] `` becomes
    ``[host 1 rank 2] ``; a line without a shim's prefix gets ``[host 1] ``."""
    match = _SHIM.match(line)
    if match is None:
        return prefixed(host, line)
    return prefixed(host, line[match.end() :], match.group(1))


def trial_line(trial: int, line: str) -> str:
    """A job's output line as trial ``trial`` of a sweep shows it: the trial named in the line's one prefix."""
    match = _MERGED.match(line)
    if match is not None and match.group(1) is None:
        return f"[trial {trial} {line[1:]}"
    return f"[trial {trial}] {line}"


def parse_line(line: str) -> LinePrefix:
    """What ``line``'s prefix says (see the module docstring); a line without one is all text."""
    merged = _MERGED.match(line)
    if merged is not None:
        trial, host, writer = merged.groups()
        return LinePrefix(None if trial is None else int(trial), int(host), writer, _rank(writer),
                          line[merged.end() :])  # fmt: skip
    trial_only = _TRIAL.match(line)
    if trial_only is not None:
        return parse_line(line[trial_only.end() :])._replace(trial=int(trial_only.group(1)))
    own = _SHIM.match(line)
    if own is not None:
        return LinePrefix(None, None, own.group(1), _rank(own.group(1)), line[own.end() :])
    return LinePrefix(None, None, None, None, line)


def _rank(writer: Optional[str]) -> Optional[int]:
    match = _RANK.fullmatch(writer) if writer else None
    return int(match.group(1)) if match else None
