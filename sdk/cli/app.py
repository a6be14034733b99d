"""``ma-submit``: submit a job file and follow it, manage jobs (status, logs, stop, wait, list, delete, prune) and
look inside them (events, top, exec: :mod:`malaunch.sdk.cli.inside`).

A first argument that is not a verb is a job file (``ma-submit job.yaml`` = ``ma-submit submit job.yaml``); a job
file named like a verb is given as ``./status``; a word close to a verb that is no file gets a did-you-mean.
Words after ``--`` are the script's own arguments (``ma-submit job.yaml -- --epochs 2``). Exit codes are
decided only in :mod:`malaunch.sdk.cli.exits` (through :meth:`MaSubmitGroup.main` on the click path):

- the followed job's own exit code (``submit`` without ``--detach``, ``wait``), the command's for ``exec``; 0 for
  everything else that worked;
- 2: invalid job file, option or usage; 3: backend failure; 4: unknown job id; 124: ``wait --timeout`` ran out;
- 130: following was interrupted (the job keeps running).

Errors are one line on stderr, ``ma-submit: error: <what>, <value>; <what to do>``, never a traceback; under
``--output json`` they are also printed on stdout as ``{"error": ..., "field": ..., "exit_code": ...}``. This
module only parses and prints; the work is done by :class:`malaunch.sdk.Job` and the backends
(management verbs: :mod:`malaunch.sdk.cli.jobs`).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

import click
from malaunch.entrypoint.public import VARIABLES

from ..backends import BACKEND_NAMES, runs_here
from ..errors import EXIT_CONFIG, MalaunchError, SpecError
from ..status import exit_code_of
from .exits import EXIT_INTERRUPTED, PROG, Outcome, finish, json_output_requested, outcome_of
from .inside import INSIDE_COMMANDS
from .jobs import MANAGEMENT_COMMANDS, OUTPUT, echo_json, note
from .profile_option import job_for, open_for, profile_option
from .sweep import sweep_group

if TYPE_CHECKING:
    from ..backends import JobHandle
__all__ = ["EXIT_INTERRUPTED", "VERBS", "MaSubmitGroup", "cli", "json_output_requested", "main"]

VERBS = (
    "submit", "status", "logs", "stop", "wait", "list", "delete", "prune", "sweep", "events", "top", "exec",
    "configure",
)  # fmt: skip
_JOB_FILE_SUFFIXES = (".yaml", ".yml", ".json")


def _did_you_mean(word: str) -> Optional[str]:
    if word.startswith("-") or os.path.exists(word) or word.endswith(_JOB_FILE_SUFFIXES) or os.sep in word:
        return None
    import difflib  # only for a first word that is no verb

    close = difflib.get_close_matches(word.lower(), VERBS, n=1, cutoff=0.6)
    return close[0] if close else None


class MaSubmitGroup(click.Group):
    """The command group: implicit ``submit`` for a job file, and the one place exit codes are decided."""

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            verb = _did_you_mean(args[0])
            if verb is not None:
                raise click.UsageError(f"unknown verb {args[0]!r} (and no such job file); did you mean {verb!r}?", ctx)
            args = ["submit", *args]
        return super().parse_args(ctx, args)

    def main(  # type: ignore[override]
        self, args: Optional[Sequence[str]] = None, prog_name: Optional[str] = None, **extra: Any
    ) -> None:
        extra.pop("standalone_mode", None)
        json_mode = json_output_requested(sys.argv[1:] if args is None else args)
        outcome: Outcome
        try:
            result = super().main(args, prog_name or PROG, standalone_mode=False, **extra)
            outcome = None, result if isinstance(result, int) else 0, None
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.format_message())
            outcome = None, EXIT_CONFIG, None
        except click.ClickException as exc:
            text = exc.format_message().replace("\n", " ").rstrip(".")
            command = exc.ctx.command_path if isinstance(exc, click.UsageError) and exc.ctx else PROG
            if isinstance(exc, click.NoSuchOption) and command.endswith(" submit"):
                text += "; script arguments go after '--' (ma-submit job.yaml -- --epochs 2)"
            outcome = f"{text}; see '{command} --help'", exc.exit_code, None
        except click.Abort:
            outcome = outcome_of(KeyboardInterrupt())
        except (MalaunchError, BrokenPipeError) as exc:
            outcome = outcome_of(exc)
        finish(outcome, json_mode)


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
    ma-submit [options] JOB.yaml [-- SCRIPT_ARGS...]
    ma-submit status|logs [-f]|stop|wait|delete JOB_ID     (a unique prefix of the id is enough)
    ma-submit list | prune [--older-than 7d]
    ma-submit sweep JOB.yaml [--param lr=1e-3,3e-4]... | sweep status|wait|stop|logs SWEEP_ID
    ma-submit events [-f]|top [--watch] JOB_ID | exec JOB_ID [--host N] -- COMMAND...
    ma-submit configure [--profile NAME] ... | configure list|show   (then --profile NAME on any verb)
    """


def _follow(handle: JobHandle, output: str) -> int:
    from ..follow import follow_job  # only a followed job needs it (the verbs' imports stay lean)

    json_mode = output == "json"
    try:
        for event in follow_job(handle):
            if event.kind == "log":
                click.echo(event.text, err=json_mode)
            elif event.kind == "progress":
                note(event.text)
            elif event.status is not None:  # "end" always carries the final status
                note(event.text)
                if json_mode:
                    echo_json(event.status.to_json())
                return exit_code_of(event.status)
    except KeyboardInterrupt:
        note(f"stopped following; job {handle.id} keeps running: 'ma-submit stop {handle.id}' ends it")
        return EXIT_INTERRUPTED
    return exit_code_of(handle.status())  # pragma: no cover - follow_job always ends with an "end" event


def _named_option(error: SpecError, options: Mapping[str, str]) -> SpecError:
    """``error`` naming the command-line option that set its field (``--hosts``), not the job file;
    ``options``: field -> option, for the options given."""
    option = options.get(error.field)
    if option is None:
        return error
    hint = "remove it" if option.startswith("--env") and error.hint.startswith("remove") else f"give another {option}"
    return SpecError(option, error.problem, error.value, hint)


def _parse_env(pairs: Tuple[str, ...]) -> Dict[str, str]:
    env: Dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SpecError("--env", "must be NAME=VALUE", pair, "e.g. --env OMP_NUM_THREADS=4")
        env[name] = value
    return env


@cli.command("submit")
@click.option(
    "--run-method",
    type=click.Choice(VARIABLES["MA_RUN_METHOD"].choices, case_sensitive=False),  # the spec's RUN_METHODS
    help="Override run_method (MA_RUN_METHOD), in any case.",
)
@click.option("--backend", type=click.Choice(BACKEND_NAMES), help="Override the job file's backend.")
@click.option("--name", help="Override the job's name.")
@click.option("--hosts", type=click.IntRange(min=1), help="Override resources.hosts.")
@click.option("--devices-per-host", type=click.IntRange(min=0), help="Override resources.devices_per_host.")
@click.option("--env", "env_pairs", multiple=True, metavar="NAME=VALUE", help="Set a variable (repeatable).")
@click.option("--detach", is_flag=True, help="Print the job id and return; do not follow the job.")
@click.option("--dry-run", is_flag=True, help="Check and print what would be submitted; start nothing.")
@click.option("--output", type=OUTPUT, default="text", show_default=True, help="json: machine-readable result.")
@profile_option
@click.argument("job_file", metavar="JOB.yaml")
@click.argument("script_args", nargs=-1, metavar="[-- SCRIPT_ARGS...]")
def submit_cmd(
    run_method: Optional[str],
    backend: Optional[str],
    name: Optional[str],
    hosts: Optional[int],
    devices_per_host: Optional[int],
    env_pairs: Tuple[str, ...],
    detach: bool,
    dry_run: bool,
    output: str,
    job_file: str,
    script_args: Tuple[str, ...],
) -> int:
    """Submit JOB.yaml; follow it and exit with its exit code (unless --detach or --dry-run).

    Words after -- are appended to the job's args: ma-submit job.yaml -- --epochs 2
    """

    env = _parse_env(env_pairs)
    given = {"run_method": run_method, "name": name, "resources.hosts": hosts}
    given["resources.devices_per_host"] = devices_per_host
    options = {k: "--" + k.rsplit(".", 1)[-1].replace("_", "-") for k, value in given.items() if value is not None}
    options.update({f"env.{key}": f"--env {key}" for key in env})
    try:
        job, origins = job_for(job_file, backend, run_method)
        job = job.with_overrides(
            name=name, hosts=hosts, devices_per_host=devices_per_host, env=env, extra_args=script_args
        )
        impl = open_for(job.spec.backend)
        plan = job.plan(check=True, backend=impl)
    except SpecError as error:
        raise _named_option(error, options) from None
    if dry_run:
        click.echo(plan.render_json() if output == "json" else plan.render())
        if origins is not None:  # where the values came from, when a profile is in use (stdout stays the plan)
            click.echo(origins, err=True)
        return 0
    for warning in (text for text in plan.notes if text.startswith("warning:")):
        note(warning)
    handle = job.submit(impl, plan=plan)
    status = handle.status()
    if output == "json" and detach:
        echo_json({"id": handle.id, "state": status.state.value})
        return 0
    if detach:
        click.echo(handle.id)
        note(f"submitted; follow with 'ma-submit logs -f {handle.id}', status with 'ma-submit status {handle.id}'")
        return 0
    spec = job.spec
    note(
        f"submitted job {handle.id} ({spec.backend}: {spec.resources.hosts} host(s) x "
        f"{spec.resources.devices_per_host} device(s), {spec.run_method}); "
        f"{'job dir ' if runs_here(spec.backend) else ''}{status.location}"
    )
    return _follow(handle, output)


for _command in (*MANAGEMENT_COMMANDS, *INSIDE_COMMANDS):
    cli.add_command(_command)
cli.add_command(sweep_group)


@cli.command(
    "configure", add_help_option=False, context_settings={"ignore_unknown_options": True, "allow_extra_args": True}
)
@click.argument("words", nargs=-1, type=click.UNPROCESSED)
def configure_cmd(words: Tuple[str, ...]) -> Any:
    """Write, list or show named profiles (see 'ma-submit configure --help')."""
    from .configure import configure_group  # made from every backend's keys: imported only when it runs

    return configure_group.main(list(words), prog_name=f"{PROG} configure", standalone_mode=False)


def main(argv: Optional[Sequence[str]] = None) -> None:
    """``ma-submit`` through click, every verb (the console script, :mod:`.entry`, tries :mod:`.quick` first)."""
    cli.main(args=argv, prog_name=PROG)
