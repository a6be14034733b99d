"""How far a job got and how long it took to recover, in words: ``ma-submit status``'s and ``top``'s lines. Pure.

From the records the shim keeps (:class:`~malaunch.entrypoint.public.RankProgress`,
:class:`~malaunch.entrypoint.public.Recovery`) as a backend read them into
:class:`~malaunch.sdk.status.JobStatus`; ``now`` is the reader's clock (seconds since the epoch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from malaunch.entrypoint.public import recovery_lines, summarize

if TYPE_CHECKING:
    from malaunch.entrypoint.public import RankProgress, Recovery

__all__ = ["duration_text", "progress_line", "rank_rows", "rate_text", "recovery_block"]


def duration_text(seconds: float) -> str:
    """``seconds`` as ``45 s``, ``12 min 5 s`` or ``3 h 20 min``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def rate_text(rate: Optional[float]) -> str:
    """A rate in steps per second (a slow one in steps per minute), or words when it is not known."""
    if rate is None:
        return "rate not known yet (one step recorded)"
    if 0 < rate < 0.1:
        return f"{rate * 60:.2f} steps/min"
    return f"{rate:.2f} steps/s"


def progress_line(records: Sequence[RankProgress], running: bool, now: float) -> Optional[str]:
    """``status``'s line: the job's step (the slowest rank's, of the newest attempt), of how many, and while it runs
    the rate and the time left at that rate, and how old the newest record is; None when no rank reported any."""
    found = summarize(records)
    if found is None:
        return None
    of = f" of {found.total}" if found.total is not None else ""
    ranks = f"{found.ranks} rank{'' if found.ranks == 1 else 's'}"
    ahead = f"; the fastest at {found.fastest}" if found.fastest != found.step else ""
    attempt = found.attempt.split(".")[0]
    where = f"step {found.step}{of} ({ranks} of attempt {attempt}{ahead})"
    if not running:
        return f"{where}, the last recorded {duration_text(max(0.0, now - found.time))} ago"
    parts = [where, rate_text(found.rate)]
    if found.left is not None:
        parts.append(f"about {duration_text(found.left)} left")
    elif found.total is None:
        parts.append("time left not known (no total given to progress())")
    parts.append(f"recorded {duration_text(max(0.0, now - found.time))} ago")
    return ", ".join(parts)


def recovery_block(records: Sequence[Recovery]) -> List[str]:
    """``status``'s lines for the time to recover after each failed attempt (one block per attempt)."""
    lines: List[str] = []
    for record in records:
        own = " (the launcher's own restart)" if record.launcher_attempt is not None else ""
        lines.append(f"recovery after {record.label}{own}:")
        lines.extend(f"  {line}" for line in recovery_lines(record))
    return lines


def rank_rows(records: Sequence[RankProgress]) -> List[Tuple[str, ...]]:
    """``top``'s table of each rank's step: a header, then one row per rank (host, rank, step, rate, attempt)."""
    rows: List[Tuple[str, ...]] = [("RANK", "HOST", "STEP", "RATE", "ATTEMPT")]
    for item in sorted(records, key=lambda one: (one.rank, one.host if one.host is not None else -1)):
        step = f"{item.step}/{item.total}" if item.total is not None else str(item.step)
        rate = "-" if item.rate is None else rate_text(item.rate)
        host = "-" if item.host is None else str(item.host)
        rows.append((str(item.rank), host, step, rate, item.attempt.split(".")[0]))
    return rows
