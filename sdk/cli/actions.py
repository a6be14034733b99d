"""What each management verb of ``ma-submit`` does (status, logs, stop, wait, list, delete, prune), without click.

Each verb is a plain function taking what click passes the verb's callback, and the ``--profile`` named (None:
the one in use); it prints through :mod:`.echo` and returns the exit code of a verb that worked, or raises an SDK
error (:mod:`.exits` turns it into its line and code). The click commands (:mod:`.jobs`) call these. Without
``--backend``, a JOB_ID finds its backend the one way the SDK has, :func:`~malaunch.sdk.backends.backend_for`
(the job index, the id's format, else local); a job id may be a unique prefix.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, List, Optional, Tuple

from ..backends.listing import ListQuery
from ..logview import LogQuery, view_logs
from ..opening import job_owner
from ..status import JobState, JobStatus, describe_end, exit_code_of
from ..units import size_text
from .echo import echo, echo_json, note
from .exits import EXIT_INTERRUPTED
from .profile_use import backend_of_profile, open_with

if TYPE_CHECKING:
    from ..backends.base import Backend

__all__ = [
    "backend_named",
    "delete_jobs",
    "format_age",
    "list_jobs",
    "prune_jobs",
    "render_list",
    "render_status",
    "resolved",
    "show_logs",
    "show_status",
    "stop_job",
    "wait_job",
]


def format_age(seconds: Optional[float]) -> str:
    """``42s``, ``5m``, ``3h``, ``2d``; ``-`` when unknown."""
    if seconds is None or seconds < 0:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def resolved(backend: Optional[str], job_id: str, profile: Optional[str] = None) -> Tuple[Backend, str]:
    """The backend of ``job_id`` and its whole id, found as :func:`malaunch.sdk.backends.backend_for` finds them;
    the backend is configured by the profile ``profile`` (None: the one in use)."""
    name, ident = job_owner(job_id, backend)
    impl = open_with(name, profile)
    return impl, impl.resolve_id(ident)


def backend_named(backend: Optional[str], profile: Optional[str] = None) -> Backend:
    """The backend named, else the profile's, else the default one (the verbs without a JOB_ID: list, prune)."""
    return open_with(backend or backend_of_profile(profile), profile)


def render_status(status: JobStatus, now: Optional[float] = None) -> str:
    """The text of ``ma-submit status`` (``now``: the clock the progress line's ages are told from)."""
    code = "-" if status.exit_code is None else str(status.exit_code)
    lines = [
        f"id:        {status.id}",
        f"state:     {status.state.value}",
        f"exit code: {code}",
        f"location:  {status.location}",
    ]
    if status.message:
        lines.append(f"message:   {status.message}")
    if status.pending_reason:
        lines.append(f"waiting:   {status.pending_reason}")
    if status.platform_restarts is not None:
        lines.append(f"restarts:  {status.platform_restarts} by the platform (the whole job)")
    rows: List[Tuple[str, str, str, str]] = []
    for host in status.hosts:
        running = "" if host.pid is None else f"pid {host.pid}"
        detail = running if host.exit_code is None else f"exit code {host.exit_code}"
        if host.detail:
            detail = f"{detail}; {host.detail}" if detail else host.detail
        rows.append((f"host {host.index}:", host.address, host.state.value, detail))
    if rows:  # one column each for the label, the address and the state, whatever their lengths
        widths = [max(len("exit code:"), *(len(row[0]) for row in rows))]
        widths += [max(len(row[i]) for row in rows) for i in (1, 2)]
        for row in rows:
            lines.append(" ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " " + row[3])
    if status.progress or status.recovery:
        from ..progress_text import progress_line, recovery_block

        said = progress_line(status.progress, status.state is JobState.RUNNING, time.time() if now is None else now)
        if said is not None:
            lines.append(f"progress:  {said}")
        lines.extend(recovery_block(status.recovery))
    return "\n".join(line.rstrip() for line in lines)


def _duration_of(status: JobStatus, now: float) -> Optional[float]:
    if status.started_at is None:
        return None
    return (status.ended_at if status.ended_at is not None else now) - status.started_at


def render_list(statuses: List[JobStatus], now: float) -> str:
    """The table of ``ma-submit list``: header, then one row per job, in the given order."""
    rows = [("JOB ID", "STATE", "AGE", "DURATION", "EXIT CODE")]
    for status in statuses:
        age = None if status.created_at is None else now - status.created_at
        code = "-" if status.exit_code is None else str(status.exit_code)
        if status.pending_reason.startswith("waiting for "):  # the local queue: why it waits, at the row's end
            code = f"{code}  ({status.pending_reason})"
        rows.append((status.id, status.state.value, format_age(age), format_age(_duration_of(status, now)), code))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths)) + "  " + row[4] for row in rows
    )


def show_status(backend: Optional[str], output: str, job_id: str, profile: Optional[str] = None) -> int:
    """``ma-submit status``: the state of ``job_id`` (and of each of its hosts)."""
    impl, ident = resolved(backend, job_id, profile)
    status = impl.status_with_progress(ident)
    if output == "json":
        echo_json(status.to_json())
    else:
        echo(render_status(status))
    return 0


def show_logs(backend: Optional[str], follow: bool, tail: Optional[int], hosts: Tuple[int, ...],
              ranks: Tuple[int, ...], job_id: str, profile: Optional[str] = None) -> int:  # fmt: skip
    """``ma-submit logs``: the output of ``job_id`` merged by time, each line prefixed with its host."""
    impl, ident = resolved(backend, job_id, profile)
    query = LogQuery(hosts=frozenset(hosts), ranks=frozenset(ranks), tail=tail)
    printed = 0
    try:
        for line in view_logs(lambda follow_: impl.logs(ident, follow=follow_), query, follow):
            echo(line)
            printed += 1
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    if not printed:  # nothing at all: say so where the job never ran, rather than leave the reader guessing
        status = impl.status(ident)
        if status.is_terminal and status.started_at is None:
            said = status.message or f"{status.state.value} before it started"
            note(f"job {status.id} has no output: {said}")
    return 0


def stop_job(backend: Optional[str], job_id: str, profile: Optional[str] = None) -> int:
    """``ma-submit stop``: returns when nothing of ``job_id`` is left running (an ended job: a no-op)."""
    impl, ident = resolved(backend, job_id, profile)
    status = impl.stop(ident)
    echo(f"job {status.id} {status.state.value}")
    return 0


def wait_job(backend: Optional[str], timeout: Optional[float], job_id: str, profile: Optional[str] = None) -> int:
    """``ma-submit wait``: wait for ``job_id`` to end; its exit code."""
    impl, ident = resolved(backend, job_id, profile)
    try:
        status = impl.handle(ident).wait(timeout=timeout)
    except KeyboardInterrupt:  # as submit's following says it: a Ctrl-C of a wait is no stop of the job
        note(f"stopped waiting; job {ident} keeps running: 'ma-submit stop {ident}' ends it")
        return EXIT_INTERRUPTED
    echo(describe_end(status))
    return exit_code_of(status)


def list_jobs(backend: Optional[str], output: str, limit: int, states: Tuple[str, ...], name: Optional[str],
              since: Optional[float], older_than: Optional[float], profile: Optional[str] = None) -> int:  # fmt: skip
    """``ma-submit list``: the jobs of a backend, newest first (those whose state cannot be read noted on stderr)."""
    query = ListQuery(frozenset(s.upper() for s in states), name, since, older_than, limit)
    page = backend_named(backend, profile).list_page(query, now=time.time())
    for text in page.notes:
        note(text)
    statuses = list(page.statuses)
    if output == "json":
        echo_json([
            {"id": s.id, "state": s.state.value, "exit_code": s.exit_code, "name": s.name, "message": s.message,
             "created_at": s.created_at, "started_at": s.started_at, "ended_at": s.ended_at}
            for s in statuses
        ])  # fmt: skip
        _note_more(page.more)
        return 0
    readable: List[JobStatus] = []
    for status in statuses:  # one pass: asking `status in readable` for each was quadratic (--limit 0 of 10,000)
        if status.state is JobState.UNKNOWN and status.raw_state == "damaged":
            note(f"skipped job {status.id}: {status.message}")
        else:
            readable.append(status)
    if not readable:
        note("no jobs")
        _note_more(page.more)
        return 0
    echo(render_list(readable, time.time()))
    _note_more(page.more)
    return 0


def _note_more(more: int) -> None:
    if more:
        note(f"{more} more job(s) not shown; --limit N shows more, --limit 0 all")


def delete_jobs(backend: Optional[str], job_ids: Tuple[str, ...], profile: Optional[str] = None) -> int:
    """``ma-submit delete``: ended jobs and their files (a running job must be stopped first)."""
    for job_id in job_ids:
        impl, ident = resolved(backend, job_id, profile)
        echo(f"deleted {impl.delete(ident)}")
    return 0


def prune_jobs(backend: Optional[str], older_than: float, states: Tuple[str, ...], keep: int, dry_run: bool,
               profile: Optional[str] = None) -> int:  # fmt: skip
    """``ma-submit prune``: every ended job that ended longer ago than ``older_than``; never a running one."""
    result = backend_named(backend, profile).prune(
        older_than, states=frozenset(s.upper() for s in states), keep=keep, dry_run=dry_run
    )
    for text in result.notes:
        note(text)
    for job_id in result.deleted:
        echo(f"{'would delete' if dry_run else 'deleted'} {job_id}")
    for job_id, reason in result.kept:
        note(f"kept job {job_id}: {reason}")
    verb, freed = ("would prune", "would free") if dry_run else ("pruned", "freed")
    disk = f", {freed} {size_text(result.freed)} of disk" if result.freed else ""
    note(f"{verb} {len(result.deleted)} job(s) that ended more than {format_age(older_than)} ago{disk}")
    return 0
