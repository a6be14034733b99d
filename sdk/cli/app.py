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
module only parses and prints; the work is done by :class:`malaunch.sdk.Job` and the backends (submit:
:mod:`malaunch.sdk.cli.submit`; management verbs: :mod:`malaunch.sdk.cli.jobs`). Each verb's module is imported
only when that verb runs or its help is asked (:mod:`malaunch.sdk.cli.verbs`).
"""

from __future__ import annotations

import os
import sys
from typing import Any, List, Optional, Sequence, Tuple

import click

from ..errors import EXIT_CONFIG, MalaunchError
from .exits import EXIT_INTERRUPTED, PROG, Outcome, finish, json_output_requested, outcome_of, said_write_failure
from .quick import verb_first
from .verbs import VERBS, VerbGroup

__all__ = ["EXIT_INTERRUPTED", "VERBS", "MaSubmitGroup", "cli", "json_output_requested", "main"]

_JOB_FILE_SUFFIXES = (".yaml", ".yml", ".json")


def _did_you_mean(word: str) -> Optional[str]:
    if word.startswith("-") or os.path.exists(word) or word.endswith(_JOB_FILE_SUFFIXES) or os.sep in word:
        return None
    import difflib  # only for a first word that is no verb

    close = difflib.get_close_matches(word.lower(), VERBS, n=1, cutoff=0.6)
    return close[0] if close else None


class MaSubmitGroup(VerbGroup):
    """The command group: implicit ``submit`` for a job file, and the one place exit codes are decided."""

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        args = verb_first(args)  # ma-submit --profile lab list: the options given before the verb go after it
        if args and args[0] not in VERBS and args[0] not in ("--help", "-h", "--version"):
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
        except OSError as exc:  # output that stopped midway for another reason (a full disk; click's own help)
            if not said_write_failure(exc):
                raise
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
    ma-submit host lose|restore JOB_ID HOST                (local jobs: try a recovery by hand)
    ma-submit checkpoints JOB_ID | --resume-from JOB_ID[:NAME] JOB.yaml
    """


@click.command(
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
