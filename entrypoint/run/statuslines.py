"""The progress and recovery lines a shim writes to its console, for readers that see only its log (issue 39).

A cloud job's files stay in its containers; what ``ma-submit status`` can read of a running ModelArts or Volcano
job is its log (the per-task log API, the pod log). So every host's shim writes, among its own console lines:

- a **progress line** with its ranks' last :mod:`.progress` records (the newest attempt's): when the slowest
  rank's step (or the attempt) changed, at most every :data:`PROGRESS_EVERY` seconds, the first record of an
  attempt at once, and the last state when the attempt's run ends (:class:`~.beacon.ProgressBeacon`);
- a **recovery line** with its :mod:`.recovery` records each time they change (after each failed attempt, when
  the next one starts, when the loop is over). Host 0's are the job's (its coordinator's view), as on the local
  backend, whose ``status`` reads host 0's ``recovery.json``.

The form, version 1, one line each, with the shim's one prefix (:data:`SHIM_PREFIX`, as every line of its own)::

    [ma-entrypoint] progress/v1 {"ranks":[[RANK,STEP,TOTAL,TIME,FIRST,"K.R",WINDOW_STEP,WINDOW_TIME],...]}
    [ma-entrypoint] recovery/v1 {"recovery":[[ATTEMPT,FAILURE_SEEN,LAST_RANK_GONE,NEXT_STARTED,FIRST_PROGRESS,ENDED,
                                          NEXT_ENDED,LAUNCHER_ATTEMPT]]}

Times are seconds since the epoch (UTC); a phase not reached is null; ENDED is 0 or 1. The payload is compact
JSON of numbers and the attempt's ``"K.R"`` only: no path, no environment, no secret. A line stays within
:data:`MAX_LINE` bytes (a pipe write that small is atomic): a host with too many ranks for it lists its slowest.

A reader (:func:`read_status_lines`) takes only lines that *start* with the shim's prefix and the tag: every line
a rank writes reaches the console behind its own ``[rank N]`` prefix (:mod:`.output`), so a rank that prints the
tag is never taken. A line cut short (the tail of a log being written, a window that starts mid-line) or damaged
is passed over; the newest good line of each kind wins.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from .progress import newest_attempt, record_of_row
from .recovery import Recovery

if TYPE_CHECKING:
    from .progress import RankProgress

__all__ = ["MAX_LINE", "PROGRESS_EVERY", "PROGRESS_TAG", "RECOVERY_TAG", "SHIM_PREFIX", "LogRecords", "progress_text",
           "read_status_lines", "recovery_text"]  # fmt: skip

SHIM_PREFIX = "[ma-entrypoint] "  # the prefix of every line the shim writes itself (main.PROG, Output.say)
PROGRESS_TAG = "progress/v1"
RECOVERY_TAG = "recovery/v1"
#: Seconds between two progress lines of one host at most (a changed step waits for the rest of them).
PROGRESS_EVERY = 30.0
#: Bytes of a whole line (prefix and newline included) at most.
MAX_LINE = 4000


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def progress_text(records: Sequence[RankProgress]) -> Optional[str]:
    """The progress line (without the prefix) of this host's records: the newest attempt's, by rank; the slowest
    ranks when they all do not fit in :data:`MAX_LINE`. None when no rank recorded any."""
    current = sorted(newest_attempt(records), key=lambda record: (record.step, record.rank))
    if not current:
        return None
    room = MAX_LINE - len(SHIM_PREFIX) - len(PROGRESS_TAG) - len(' {"ranks":[]}') - 1
    rows: List[str] = []
    for record in current:
        row = _compact(record.row())
        if sum(len(item) + 1 for item in rows) + len(row) > room:
            break
        rows.append(row)
    rows.sort(key=lambda text: int(text[1 : text.index(",")]))  # by rank again
    return f'{PROGRESS_TAG} {{"ranks":[{",".join(rows)}]}}'


def _recovery_row(record: Recovery) -> List[object]:
    times = [record.failure_seen, record.last_rank_gone, record.next_started, record.first_progress]
    over = None if record.next_ended is None else round(record.next_ended, 3)
    return [record.attempt, *(None if when is None else round(when, 3) for when in times), int(record.ended), over,
            record.launcher_attempt]  # fmt: skip


def recovery_text(records: Sequence[Recovery]) -> Optional[str]:
    """The recovery line (without the prefix) of the records, oldest first (the newest when they do not all fit);
    None without a record."""
    rows = [_compact(_recovery_row(record)) for record in records]
    room = MAX_LINE - len(SHIM_PREFIX) - len(RECOVERY_TAG) - len(' {"recovery":[]}') - 1
    while rows and sum(len(item) + 1 for item in rows) > room:
        rows.pop(0)
    return f'{RECOVERY_TAG} {{"recovery":[{",".join(rows)}]}}' if rows else None


class LogRecords(NamedTuple):
    """What the newest good progress and recovery lines of one log say (empty: no such line)."""

    progress: Tuple[RankProgress, ...] = ()
    recovery: Tuple[Recovery, ...] = ()


def _payload(line: str, tag: str, key: str) -> Optional[List[object]]:
    """The list under ``key`` of a line that starts with the shim's prefix and ``tag``, else None."""
    head = f"{SHIM_PREFIX}{tag} "
    if not line.startswith(head) or len(line) > 2 * MAX_LINE:
        return None
    try:
        value = json.loads(line[len(head) :].rstrip("\r\n"))
    except ValueError:  # cut short, damaged
        return None
    items = value.get(key) if isinstance(value, dict) else None
    return items if isinstance(items, list) else None


def _progress(items: List[object], host: Optional[int]) -> Optional[Tuple[RankProgress, ...]]:
    found = [record_of_row(item, host) for item in items]
    good = [record for record in found if record is not None]
    return tuple(good) if good and len(good) == len(found) else None


def _recovery(items: List[object]) -> Optional[Tuple[Recovery, ...]]:
    found: List[Recovery] = []
    for item in items:
        if not (isinstance(item, list) and len(item) in (6, 8)):  # 6: a shim before next_ended and torchrun's rounds
            return None
        data = dict(zip(("attempt", "failure_seen", "last_rank_gone", "next_started", "first_progress"), item))
        extra = dict(zip(("next_ended", "launcher_attempt"), item[6:]))
        record = Recovery.from_json({**data, **extra, "ended": item[5] == 1})
        if record is None:
            return None
        found.append(record)
    return tuple(found) if found else None


def read_status_lines(lines: Iterable[str], host: Optional[int] = None) -> LogRecords:
    """The newest good progress line's records (each with ``host``: the host whose log it is) and the newest good
    recovery line's records among ``lines`` (a log's lines, oldest first, as written: no reader's prefix)."""
    progress: Optional[Tuple[RankProgress, ...]] = None
    recovery: Optional[Tuple[Recovery, ...]] = None
    for line in reversed(list(lines)):
        if progress is None and line.startswith(SHIM_PREFIX + PROGRESS_TAG):
            items = _payload(line, PROGRESS_TAG, "ranks")
            progress = _progress(items, host) if items is not None else None
        elif recovery is None and line.startswith(SHIM_PREFIX + RECOVERY_TAG):
            items = _payload(line, RECOVERY_TAG, "recovery")
            recovery = _recovery(items) if items is not None else None
        if progress is not None and recovery is not None:
            break
    return LogRecords(progress or (), recovery or ())
