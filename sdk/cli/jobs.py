"""The management verbs of ``ma-submit`` as click commands: status, logs, stop, wait, list, delete, prune.

Each command parses its options and calls the verb's function in :mod:`.actions`, passing the ``--profile``
given. Every verb takes ``--backend``; without it a JOB_ID
finds its backend the one way the SDK has, :func:`~malaunch.sdk.backends.backend_for`. The helpers the other verb
groups share are public here (:func:`backend_option`, :func:`resolved`, :func:`note`, :func:`echo_json`); exit
codes are decided in :mod:`.exits`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Tuple

import click

from ..backends import BACKEND_NAMES
from ..backends.listing import DEFAULT_LIMIT
from ..status import JobState
from ..units import parse_duration
from . import actions
from .actions import format_age, render_list, render_status
from .echo import echo_json, note
from .exits import EXIT_INTERRUPTED
from .output import OUTPUT
from .profile_option import chosen_profile, profile_option

if TYPE_CHECKING:
    from ..backends.base import Backend

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
    """The backend of ``job_id`` and its whole id (:func:`.actions.resolved`), with the profile in use."""
    return actions.resolved(backend, job_id, chosen_profile())


def backend_named(backend: Optional[str]) -> Backend:
    """The backend named, else the profile's, else the default one (the verbs without a JOB_ID: list, prune)."""
    return actions.backend_named(backend, chosen_profile())


@click.command("status")
@backend_option
@click.option("--output", type=OUTPUT, default="text", show_default=True, help="json: machine-readable.")
@click.argument("job_id")
def status_cmd(backend: Optional[str], output: str, job_id: str) -> int:
    """Show the state of JOB_ID (and of each of its hosts)."""
    return actions.show_status(backend, output, job_id, chosen_profile())


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
    return actions.show_logs(backend, follow, tail, hosts, ranks, job_id, chosen_profile())


@click.command("stop")
@backend_option
@click.argument("job_id")
def stop_cmd(backend: Optional[str], job_id: str) -> int:
    """Stop JOB_ID; returns when nothing of it is left running (stopping an ended job is a no-op)."""
    return actions.stop_job(backend, job_id, chosen_profile())


@click.command("wait")
@backend_option
@click.option("--timeout", type=click.FloatRange(min=0), help="Give up after this many seconds (exit 124).")
@click.argument("job_id")
def wait_cmd(backend: Optional[str], timeout: Optional[float], job_id: str) -> int:
    """Wait for JOB_ID to end and exit with its exit code."""
    return actions.wait_job(backend, timeout, job_id, chosen_profile())


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
    return actions.list_jobs(backend, output, limit, states, name, since, older_than, chosen_profile())


@click.command("delete")
@backend_option
@click.argument("job_ids", nargs=-1, required=True, metavar="JOB_ID...")
def delete_cmd(backend: Optional[str], job_ids: Tuple[str, ...]) -> int:
    """Delete ended jobs and their files (a running job must be stopped first)."""
    return actions.delete_jobs(backend, job_ids, chosen_profile())


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
    return actions.prune_jobs(backend, older_than, states, keep, dry_run, chosen_profile())


MANAGEMENT_COMMANDS = (status_cmd, logs_cmd, stop_cmd, wait_cmd, list_cmd, delete_cmd, prune_cmd)
