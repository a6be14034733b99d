"""A cloud job's progress and time to recover, read from its hosts' log tails (``ma-submit status`` and ``top``).

A ModelArts or Volcano job's files stay in its containers, so its shims also write their ranks' progress and their
time-to-recover records to their consoles, one line each at a bounded rate (the format's one home is the shim's,
:func:`malaunch.entrypoint.public.read_status_lines`): the SDK reads the last part of each host's log (the
per-task log API, the pod log with ``tailLines``/``limitBytes``), takes the newest good line of each kind, and
shows the same lines a local job's records give. As SageMaker reads a job's metrics: a fixed pattern over its log.

What this costs and misses (docs/recovery.md#progress-of-a-cloud-job): one log read per host per ``status``; a line
is at most :data:`~malaunch.entrypoint.public.PROGRESS_EVERY` seconds behind the ranks, plus the platform's own
log delay; a host whose last :data:`LOG_TAIL_BYTES` hold no such line (a rank that prints more than that between two
progress lines) shows none, and a log that cannot be read costs its host's lines, never the status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, List, Sequence, Tuple

from malaunch.entrypoint.public import read_status_lines, with_first_progress

if TYPE_CHECKING:
    from malaunch.entrypoint.public import RankProgress, Recovery

    from ..status import JobStatus

__all__ = ["LOG_TAIL_BYTES", "LOG_TAIL_LINES", "HostTail", "log_progress", "tail_lines", "with_log_progress"]

#: Lines of a host's log read at most (the pod log's ``tailLines``).
LOG_TAIL_LINES = 2000
#: Bytes of a host's log read at most (``limitBytes``; a ``Range`` read of the log's end).
LOG_TAIL_BYTES = 512 * 1024

HostTail = Tuple[int, Sequence[str]]  # (host index, the last lines of its log, oldest first)


def tail_lines(data: bytes) -> List[str]:
    """The lines of a log's last bytes, decoded as UTF-8 with replacement (a cut character costs its line only)."""
    return data.decode("utf-8", errors="replace").splitlines()[-LOG_TAIL_LINES:]


def log_progress(tails: Iterable[HostTail]) -> Tuple[Tuple[RankProgress, ...], Tuple[Recovery, ...]]:
    """Every host's ranks' records (its newest progress line's, each with its host) and host 0's time-to-recover
    records (its newest recovery line's, with the first progress of a next attempt filled in from the records)."""
    records: List[RankProgress] = []
    recovery: Tuple[Recovery, ...] = ()
    for host, lines in sorted(tails, key=lambda item: item[0]):
        found = read_status_lines(lines, host)
        records.extend(found.progress)
        if host == 0:
            recovery = found.recovery
    return tuple(records), tuple(with_first_progress(recovery, records))


def with_log_progress(status: JobStatus, tails: Iterable[HostTail]) -> JobStatus:
    """``status`` with what its hosts' log tails say of its progress and time to recover."""
    progress, recovery = log_progress(tails)
    return status._replace(progress=progress, recovery=recovery)
