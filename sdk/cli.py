"""``ma-submit``: submit a job file and follow it, or manage jobs (status, logs, stop, wait, list).

A first argument that is not a verb is a job file (``ma-submit job.yaml`` = ``ma-submit submit job.yaml``); a job
file named like a verb is given as ``./status``. Exit codes are decided only in :meth:`MaSubmitGroup.main`:

- the followed job's own exit code (``submit`` without ``--detach``, ``wait``); 0 for everything else that worked;
- 2: invalid job file, option or usage; 3: backend failure; 4: unknown job id; 124: ``wait --timeout`` ran out;
- 130: following was interrupted (the job keeps running).

Errors are one line on stderr, ``ma-submit: error: <what>, <value>; <what to do>``, never a traceback. This
module only parses and prints; the work is done by :class:`malaunch.sdk.Job` and the backends.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, List, Optional, Sequence

import click

from .backends import Backend, JobHandle, get_backend
from .backends.job_index import JobIndex
from .errors import EXIT_CONFIG, MalaunchError, exit_code_for
from .follow import describe_end, follow_job
from .job import Job
from .spec import BACKEND_NAMES, RUN_METHODS
from .status import JobStatus, exit_code_of

__all__ = ["EXIT_INTERRUPTED", "MaSubmitGroup", "cli", "main"]

PROG = "ma-submit"
EXIT_INTERRUPTED = 130
VERBS = ("submit", "status", "logs", "stop", "wait", "list")
_OUTPUT = click.Choice(["text", "json"])


def _error(text: str) -> None:
    click.echo(f"{PROG}: error: {text}", err=True)


def _note(text: str) -> None:
    click.echo(f"{PROG}: {text}", err=True)


class MaSubmitGroup(click.Group):
    """The command group: implicit ``submit`` for a job file, and the one place exit codes are decided."""

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = ["submit", *args]
        return super().parse_args(ctx, args)

    def main(  # type: ignore[override]
        self, args: Optional[Sequence[str]] = None, prog_name: Optional[str] = None, **extra: Any
    ) -> None:
        extra.pop("standalone_mode", None)
        try:
            result = super().main(args, prog_name or PROG, standalone_mode=False, **extra)
            code = result if isinstance(result, int) else 0
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.format_message())
            code = EXIT_CONFIG
        except click.ClickException as exc:
            message = exc.format_message().replace("\n", " ").rstrip(".")
            command = exc.ctx.command_path if isinstance(exc, click.UsageError) and exc.ctx else PROG
            _error(f"{message}; see '{command} --help'")
            code = exc.exit_code
        except MalaunchError as exc:
            _error(str(exc))
            code = exit_code_for(exc)
        except click.Abort:
            _error("interrupted")
            code = EXIT_INTERRUPTED
        except BrokenPipeError:
            code = 141
        sys.exit(code)


_EPILOG = (
    "Exit codes: the job's own exit code when following (submit, wait); 0 otherwise on success; 2 invalid job file "
    "or option; 3 backend failure; 4 unknown job id; 124 wait timeout; 130 interrupted (the job keeps running). "
    "Jobs of the local backend live under $MALAUNCH_HOME (default ~/.malaunch). See docs/cli.md."
)


@click.group(
    cls=MaSubmitGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    epilog=_EPILOG,
)
@click.version_option(package_name="malaunch", prog_name=PROG)
def cli() -> None:
    """Submit distributed training jobs (torchrun, msrun, rank table) and manage them.

    \b
    ma-submit [--run-method M] [--backend B] [--detach] [--dry-run] [--output text|json] JOB.yaml
    ma-submit status|logs [-f]|stop|wait JOB_ID
    ma-submit list
    """


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2))


def _follow(handle: JobHandle, output: str) -> int:
    json_mode = output == "json"
    try:
        for event in follow_job(handle):
            if event.kind == "log":
                click.echo(event.text, err=json_mode)
            elif event.kind == "progress":
                _note(event.text)
            elif event.status is not None:  # "end" always carries the final status
                _note(event.text)
                if json_mode:
                    _echo_json(event.status.to_json())
                return exit_code_of(event.status)
    except KeyboardInterrupt:
        _note(f"stopped following; job {handle.id} keeps running: 'ma-submit stop {handle.id}' ends it")
        return EXIT_INTERRUPTED
    return exit_code_of(handle.status())  # pragma: no cover - follow_job always ends with an "end" event


@cli.command("submit")
@click.option("--run-method", type=click.Choice(RUN_METHODS), help="Override run_method (MA_RUN_METHOD).")
@click.option("--backend", type=click.Choice(BACKEND_NAMES), help="Override the job file's backend.")
@click.option("--detach", is_flag=True, help="Print the job id and return; do not follow the job.")
@click.option("--dry-run", is_flag=True, help="Print exactly what would be submitted; start nothing.")
@click.option("--output", type=_OUTPUT, default="text", show_default=True, help="json: machine-readable result.")
@click.argument("job_file", metavar="JOB.yaml")
def submit_cmd(
    run_method: Optional[str], backend: Optional[str], detach: bool, dry_run: bool, output: str, job_file: str
) -> int:
    """Submit JOB.yaml; follow it and exit with its exit code (unless --detach or --dry-run)."""
    job = Job.from_yaml(job_file, run_method=run_method, backend=backend)
    if dry_run:
        plan = job.plan()
        click.echo(plan.render_json() if output == "json" else plan.render())
        return 0
    handle = job.submit()
    status = handle.status()
    if output == "json" and detach:
        _echo_json({"id": handle.id, "state": status.state.value})
        return 0
    if detach:
        click.echo(handle.id)
        _note(f"submitted; follow with 'ma-submit logs -f {handle.id}', status with 'ma-submit status {handle.id}'")
        return 0
    spec = job.spec
    _note(
        f"submitted job {handle.id} ({spec.backend}: {spec.resources.hosts} host(s) x "
        f"{spec.resources.devices_per_host} device(s), {spec.run_method}); job dir {status.location}"
    )
    return _follow(handle, output)


def _backend_option(function: Any) -> Any:
    return click.option(
        "--backend",
        type=click.Choice(BACKEND_NAMES),
        default=None,
        help="Where the job runs. Default: the backend this machine submitted JOB_ID to, else local.",
    )(function)


def _backend_for(backend: Optional[str], job_id: Optional[str]) -> Backend:
    if backend is None and job_id is not None:
        backend = JobIndex.default(os.environ).backend_of(job_id)
    return get_backend(backend or "local")


def _render_status(status: JobStatus) -> str:
    code = "-" if status.exit_code is None else str(status.exit_code)
    lines = [
        f"id:        {status.id}",
        f"state:     {status.state.value}",
        f"exit code: {code}",
        f"location:  {status.location}",
    ]
    if status.message:
        lines.append(f"message:   {status.message}")
    for host in status.hosts:
        running = "" if host.pid is None else f"pid {host.pid}"
        detail = running if host.exit_code is None else f"exit code {host.exit_code}"
        lines.append(f"host {host.index}:    {host.address:<15} {host.state.value:<8} {detail}")
    return "\n".join(lines)


@cli.command("status")
@_backend_option
@click.option("--output", type=_OUTPUT, default="text", show_default=True, help="json: machine-readable.")
@click.argument("job_id")
def status_cmd(backend: Optional[str], output: str, job_id: str) -> int:
    """Show the state of JOB_ID (and of each of its hosts)."""
    status = _backend_for(backend, job_id).status(job_id)
    if output == "json":
        _echo_json(status.to_json())
    else:
        click.echo(_render_status(status))
    return 0


@cli.command("logs")
@_backend_option
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until the job ends.")
@click.argument("job_id")
def logs_cmd(backend: Optional[str], follow: bool, job_id: str) -> int:
    """Print the output of JOB_ID, each line prefixed with its host."""
    try:
        for line in _backend_for(backend, job_id).logs(job_id, follow=follow):
            click.echo(line)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return 0


@cli.command("stop")
@_backend_option
@click.argument("job_id")
def stop_cmd(backend: Optional[str], job_id: str) -> int:
    """Stop JOB_ID; returns when nothing of it is left running (stopping an ended job is a no-op)."""
    status = _backend_for(backend, job_id).stop(job_id)
    click.echo(f"job {status.id} {status.state.value}")
    return 0


@cli.command("wait")
@_backend_option
@click.option("--timeout", type=click.FloatRange(min=0), help="Give up after this many seconds (exit 124).")
@click.argument("job_id")
def wait_cmd(backend: Optional[str], timeout: Optional[float], job_id: str) -> int:
    """Wait for JOB_ID to end and exit with its exit code."""
    try:
        status = _backend_for(backend, job_id).handle(job_id).wait(timeout=timeout)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    click.echo(describe_end(status))
    return exit_code_of(status)


@cli.command("list")
@_backend_option
@click.option("--output", type=_OUTPUT, default="text", show_default=True, help="json: machine-readable.")
def list_cmd(backend: Optional[str], output: str) -> int:
    """List the jobs of a backend, newest first."""
    statuses = _backend_for(backend, None).list()
    if output == "json":
        _echo_json([{"id": s.id, "state": s.state.value, "exit_code": s.exit_code, "name": s.name} for s in statuses])
        return 0
    if not statuses:
        _note("no jobs")
    for status in statuses:
        code = "-" if status.exit_code is None else str(status.exit_code)
        click.echo(f"{status.id:<48} {status.state.value:<10} {code}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Console-script entry point (``ma-submit``)."""
    cli.main(args=argv, prog_name=PROG)
