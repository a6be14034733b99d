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

import difflib
import os
import sys
from typing import Any, List, Optional, Sequence

import click

from ..errors import EXIT_CONFIG, MalaunchError
from .exits import EXIT_INTERRUPTED, PROG, Outcome, finish, json_output_requested, outcome_of, said_write_failure
from .verbs import VERBS, VerbGroup

__all__ = ["EXIT_INTERRUPTED", "VERBS", "MaSubmitGroup", "cli", "json_output_requested", "main", "verb_first"]

_JOB_FILE_SUFFIXES = (".yaml", ".yml", ".json")
#: The options that may come before the verb (``ma-submit --profile lab list``, as with git), each with a value.
_LEADING = ("--profile", "--backend", "--output")


def verb_first(args: Sequence[str]) -> List[str]:
    """``args`` with the options given before the verb moved after it: ``--profile lab list`` is ``list --profile
    lab``. Only :data:`_LEADING` options (``--profile NAME`` or ``--profile=NAME``) followed by a verb are moved;
    anything else is left as it is (a job file after them is an implicit ``submit``, which takes them as given)."""
    words = list(args)
    at = 0
    while at < len(words) and words[at].split("=", 1)[0] in _LEADING:
        at += 1 if "=" in words[at] else 2
    if 0 < at < len(words) and words[at] in VERBS:
        return [words[at], *words[:at], *words[at + 1 :]]
    return words


def _did_you_mean(word: str) -> Optional[str]:
    if word.startswith("-") or os.path.exists(word) or word.endswith(_JOB_FILE_SUFFIXES) or os.sep in word:
        return None
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


def main(argv: Optional[Sequence[str]] = None) -> None:
    """``ma-submit``, every verb (the console script's :func:`.entry.main` calls it)."""
    cli.main(args=argv, prog_name=PROG)
