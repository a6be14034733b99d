"""The management verbs of ``ma-submit``: status, logs, stop, wait, list, delete, prune (parse, call, print).

Every verb takes ``--backend``; without it a JOB_ID finds its backend the one way the SDK has,
:func:`~malaunch.sdk.backends.backend_for` (the job index, the id's format, else local), so every verb works the
same on every backend; a job id may be a unique prefix. The helpers the other verb groups share are public here
(:func:`backend_option`, :func:`resolved`; :func:`note` and :func:`echo_json` from :mod:`.output`). Printing lives
here and in the other verb groups; exit codes are decided in ``MaSubmitGroup.main``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

import click

from ..backends import BACKEND_NAMES, job_owner
from ..backends.listing import DEFAULT_LIMIT, ListQuery
from ..status import JobState, JobStatus, exit_code_of
from ..units import parse_duration, size_text
from .output import EXIT_INTERRUPTED, OUTPUT, echo_json, note
from .profile_option import open_for, profile_backend, profile_option

if TYPE_CHECKING:
    from ..backends import Backend

__all__ = [
    "EXIT_INTERRUPTED",
    "MANAGEMENT_COMMANDS",
    "OUTPUT",
    "backend_named",
    "backend_option",
    "echo_json",
    "format_age",
    "note",
    "parse_duration",
    "render_list",
    "render_status",
    "resolved",
]


def format_age(seconds: Optional[float]) -> str:
    """``42s``, ``5m``, ``3h``, ``2d``; ``-`` when unknown."""
    if seconds is None or seconds < 0:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


class _Duration(click.ParamType[float]):
    name = "DURATION"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> float:
        if isinstance(value, float):
            return value
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def backend_option(function: Any) -> Any:
    """The ``--backend`` and ``--profile`` options of the verbs that take a JOB_ID (or none)."""
    with_backend = click.option(
        "--backend",
        type=click.Choice(BACKEND_NAMES),
        default=None,
        help="Where the job runs. Default: the backend this machine submitted JOB_ID to, else the one whose "
        "id format JOB_ID has (volcano: NAMESPACE/NAME, modelarts: the platform's UUID), else local.",
    )(function)
    return profile_option(with_backend)


def resolved(backend: Optional[str], job_id: str) -> Tuple[Backend, str]:
    """The backend of ``job_id`` and its whole id, found as :func:`malaunch.sdk.backends.backend_for` finds them;
    the backend is configured by the profile in use."""
    name, ident = job_owner(job_id, backend)
    impl = open_for(name)
    return impl, impl.resolve_id(ident)


def backend_named(backend: Optional[str]) -> Backend:
    """The backend named, else the profile's, else the default one (the verbs without a JOB_ID: list, prune)."""
    return open_for(backend or profile_backend())


def render_status(status: JobStatus) -> str:
    """The text of ``ma-submit status``."""
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
        rows.append((status.id, status.state.value, format_age(age), format_age(_duration_of(status, now)), code))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths)) + "  " + row[4] for row in rows
    )


@click.command("status")
@backend_option
@click.option("--output", type=OUTPUT, default="text", show_default=True, help="json: machine-readable.")
@click.argument("job_id")
def status_cmd(backend: Optional[str], output: str, job_id: str) -> int:
    """Show the state of JOB_ID (and of each of its hosts)."""
    impl, ident = resolved(backend, job_id)
    status = impl.status(ident)
    if output == "json":
        echo_json(status.to_json())
    else:
        click.echo(render_status(status))
    return 0


@click.command("logs")
@backend_option
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until the job ends.")
@click.option("--tail", type=click.IntRange(min=0), metavar="N", help="Only the last N lines (then new ones with -f).")
@click.option("--host", "hosts", type=click.IntRange(min=0), multiple=True, help="Only this host (repeatable).")
@click.option("--rank", "ranks", type=click.IntRange(min=0), multiple=True, help="Only this rank (repeatable).")
@click.argument("job_id")
def logs_cmd(backend: Optional[str], follow: bool, tail: Optional[int], hosts: Tuple[int, ...], ranks: Tuple[int, ...],
             job_id: str) -> int:  # fmt: skip
    """Print the output of JOB_ID merged by time, each line prefixed with its host."""
    from ..logview import LogQuery, view_logs

    impl, ident = resolved(backend, job_id)
    query = LogQuery(hosts=frozenset(hosts), ranks=frozenset(ranks), tail=tail)
    try:
        for line in view_logs(lambda follow_: impl.logs(ident, follow=follow_), query, follow):
            click.echo(line)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return 0


@click.command("stop")
@backend_option
@click.argument("job_id")
def stop_cmd(backend: Optional[str], job_id: str) -> int:
    """Stop JOB_ID; returns when nothing of it is left running (stopping an ended job is a no-op)."""
    impl, ident = resolved(backend, job_id)
    status = impl.stop(ident)
    click.echo(f"job {status.id} {status.state.value}")
    return 0


@click.command("wait")
@backend_option
@click.option("--timeout", type=click.FloatRange(min=0), help="Give up after this many seconds (exit 124).")
@click.argument("job_id")
def wait_cmd(backend: Optional[str], timeout: Optional[float], job_id: str) -> int:
    """Wait for JOB_ID to end and exit with its exit code."""
    from ..follow import describe_end

    impl, ident = resolved(backend, job_id)
    try:
        status = impl.handle(ident).wait(timeout=timeout)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    click.echo(describe_end(status))
    return exit_code_of(status)


_STATES = click.Choice([state.value.lower() for state in JobState], case_sensitive=False)
_ENDED = click.Choice([state.value.lower() for state in JobState if state.is_terminal], case_sensitive=False)


@click.command("list")
@backend_option
@click.option("--output", type=OUTPUT, default="text", show_default=True, help="json: machine-readable.")
@click.option("--limit", type=click.IntRange(min=0), default=DEFAULT_LIMIT, show_default=True, metavar="N",
              help="Show the newest N jobs (0: all); a line on stderr says how many more there are.")  # fmt: skip
@click.option("--state", "states", type=_STATES, multiple=True, help="Only jobs in this state (repeatable).")
@click.option("--name", metavar="GLOB", help="Only jobs whose job-file name matches (train-*).")
@click.option("--since", type=_Duration(), metavar="DURATION", help="Only jobs created at most this long ago (2h).")
@click.option("--older-than", type=_Duration(), metavar="DURATION", help="Only jobs created longer ago (7d).")
def list_cmd(backend: Optional[str], output: str, limit: int, states: Tuple[str, ...], name: Optional[str],
             since: Optional[float], older_than: Optional[float]) -> int:  # fmt: skip
    """List the jobs of a backend, newest first (jobs whose state cannot be read are noted on stderr).

    The local backend answers from its history index, so a home with thousands of ended jobs lists at once."""
    query = ListQuery(frozenset(s.upper() for s in states), name, since, older_than, limit)
    page = backend_named(backend).list_page(query, now=time.time())
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
    readable = [s for s in statuses if not (s.state is JobState.UNKNOWN and s.raw_state == "damaged")]
    for status in statuses:
        if status not in readable:
            note(f"skipped job {status.id}: {status.message}")
    if not readable:
        note("no jobs")
        _note_more(page.more)
        return 0
    click.echo(render_list(readable, time.time()))
    _note_more(page.more)
    return 0


def _note_more(more: int) -> None:
    if more:
        note(f"{more} more job(s) not shown; --limit N shows more, --limit 0 all")


@click.command("delete")
@backend_option
@click.argument("job_ids", nargs=-1, required=True, metavar="JOB_ID...")
def delete_cmd(backend: Optional[str], job_ids: Tuple[str, ...]) -> int:
    """Delete ended jobs and their files (a running job must be stopped first)."""
    for job_id in job_ids:
        impl, ident = resolved(backend, job_id)
        click.echo(f"deleted {impl.delete(ident)}")
    return 0


@click.command("prune")
@backend_option
@click.option(
    "--older-than", type=_Duration(), default="7d", show_default=True, help="Only jobs that ended longer ago "
    "(90s, 30m, 12h, 7d, 2w; 0 = every ended job).",
)  # fmt: skip
@click.option("--state", "states", type=_ENDED, multiple=True, help="Only ended jobs in this state (repeatable).")
@click.option("--keep", type=click.IntRange(min=0), default=0, metavar="N",
              help="The newest N of the ended jobs (of --state) stay, however old.")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Say what would be deleted and the disk it would free; delete nothing.")
def prune_cmd(backend: Optional[str], older_than: float, states: Tuple[str, ...], keep: int, dry_run: bool) -> int:
    """Delete every ended job that ended longer ago than --older-than; running jobs are never touched.

    Nor are local jobs another process is reading (ma-submit logs); the disk freed is reported."""
    result = backend_named(backend).prune(
        older_than, states=frozenset(s.upper() for s in states), keep=keep, dry_run=dry_run
    )
    for text in result.notes:
        note(text)
    for job_id in result.deleted:
        click.echo(f"{'would delete' if dry_run else 'deleted'} {job_id}")
    for job_id, reason in result.kept:
        note(f"kept job {job_id}: {reason}")
    verb, freed = ("would prune", "would free") if dry_run else ("pruned", "freed")
    disk = f", {freed} {size_text(result.freed)} of disk" if result.freed else ""
    note(f"{verb} {len(result.deleted)} job(s) that ended more than {format_age(older_than)} ago{disk}")
    return 0


MANAGEMENT_COMMANDS = (status_cmd, logs_cmd, stop_cmd, wait_cmd, list_cmd, delete_cmd, prune_cmd)
