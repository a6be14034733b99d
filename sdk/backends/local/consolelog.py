"""Host console logs merged by time: the runner's time index (:class:`ConsoleIndex`) and its reader.

A shim writes its console straight into ``hosts/<i>/console.log``, so lines carry no time. While the job
runs, the runner notes every ~50 ms how far each console has grown, appending ``<unix time> <size>`` to
``hosts/<i>/console.idx``. :func:`merged_lines` gives each line the time of the first note that covers
its end and merges the hosts by that time (a host's own lines keep their order; lines written after the
last note, or of a job without an index, come last in host order). A damaged index line is skipped.

The console and the rank logs share the job's disk: when it fills, the console copy is cut short while the rank
logs may hold more. :func:`missing_lines` gives what a rank's log holds beyond what the console showed, so
``logs`` (and the foreground ``ma-submit``) show every line the logs kept.
"""

from __future__ import annotations

import bisect
import contextlib
import heapq
import itertools
import os
from typing import IO, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeAlias

from ..lineprefix import SDK_WRITER, host_line, prefixed

__all__ = ["ConsoleIndex", "index_path", "merged_lines", "missing_lines"]

Source: TypeAlias = "Tuple[int, str]"  # (host index, console log path)


def index_path(console_log: str) -> str:
    """The time index kept beside ``console_log``."""
    return os.path.splitext(console_log)[0] + ".idx"


class ConsoleIndex:
    """Appends ``<time> <size>`` to each console's index whenever that console has grown (runner side)."""

    def __init__(self, console_logs: Sequence[str]) -> None:
        self.logs = list(console_logs)
        self.sizes: Dict[str, int] = {path: 0 for path in self.logs}
        self.handles: Dict[str, IO[str]] = {}

    def note(self, now: float) -> None:
        """Record the current size of every console that grew; never raises (a full disk loses notes only)."""
        for path in self.logs:
            try:
                size = os.stat(path).st_size
            except OSError:
                continue
            if size == self.sizes[path]:
                continue
            try:
                handle = self.handles.get(path)
                if handle is None:
                    handle = self.handles[path] = open(index_path(path), "a", encoding="ascii")  # noqa: SIM115
                handle.write(f"{now:.3f} {size}\n")
                handle.flush()
                self.sizes[path] = size
            except OSError:
                continue

    def close(self) -> None:
        """Close the index files."""
        for handle in self.handles.values():
            with contextlib.suppress(OSError):
                handle.close()
        self.handles.clear()


def _read_index(path: str) -> Tuple[List[int], List[float]]:
    offsets: List[int] = []
    times: List[float] = []
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            for line in handle:
                parts = line.split()
                try:
                    when, size = float(parts[0]), int(parts[1])
                except (IndexError, ValueError):
                    continue
                if offsets and size <= offsets[-1]:
                    continue
                offsets.append(size)
                times.append(max(when, times[-1]) if times else when)
    except OSError:
        pass
    return offsets, times


def _text(raw: bytes) -> str:
    return raw.rstrip(b"\n").rstrip(b"\r").decode("utf-8", errors="replace")


def _timed_lines(order: int, host: int, path: str) -> Iterator[Tuple[float, int, str]]:
    offsets, times = _read_index(index_path(path))
    end = 0
    try:
        with open(path, "rb") as handle:
            for raw in handle:
                end += len(raw)
                at = bisect.bisect_left(offsets, end)
                when = times[at] if at < len(times) else float("inf")
                yield when, order, host_line(host, _text(raw))
    except OSError:
        return


def merged_lines(sources: Sequence[Source], *, limit: Optional[int] = None) -> Iterator[str]:
    """Every line of every console, merged by the time it was written (see the module docstring)."""
    streams = [_timed_lines(order, host, path) for order, (host, path) in enumerate(sources)]
    for count, (_, _, line) in enumerate(heapq.merge(*streams)):
        if limit is not None and count >= limit:
            return
        yield line


def _lines(path: str) -> Iterator[bytes]:
    try:
        with open(path, "rb") as handle:
            for raw in handle:
                yield raw.rstrip(b"\n").rstrip(b"\r")
    except OSError:
        return


def missing_lines(host: int, console_log: str, rank_logs: Mapping[int, str]) -> Iterator[str]:
    """The lines of each rank log beyond those its console copy in ``console_log`` shows, as host ``host``'s rank's
    lines (``[host 0 rank 1] ``), after one line of the SDK's saying where they come from; nothing when the console
    shows them all. A rank's console lines are matched to its log line by line: the first that differs (a line cut
    short by the full disk) is where the console stopped."""
    for rank, path in sorted(rank_logs.items()):
        tag = f"[rank {rank}] ".encode()
        shown = (line[len(tag) :] for line in _lines(console_log) if line.startswith(tag))
        kept = _lines(path)
        rest: List[bytes] = []
        for line in kept:
            if next(shown, None) != line:
                rest = [line]
                break
        for count, line in enumerate(itertools.chain(rest, kept)):
            if not count:
                yield prefixed(host, f"the console was cut short; the rest of rank {rank}'s output from {path}:",
                               SDK_WRITER)  # fmt: skip
            yield prefixed(host, _text(line), f"rank {rank}")
