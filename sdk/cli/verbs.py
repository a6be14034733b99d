"""The verbs of ``ma-submit``: each one's name, the module and attribute of its command, and its short help, known
without importing it (issue 28: ``ma-submit --help`` lists them all and loads none).

:class:`VerbGroup` is a lazy group, as click's documentation shows one (``list_commands`` from a table,
``get_command`` importing ``module:attribute`` on demand): a verb's module is imported when the verb runs or its own
``--help`` is asked, and the group's help lists every verb from the table, in the order click lists commands (by
name) and shortened to the terminal the way click shortens a command's help. The short help here is a copy of each
command's own first sentence; a test proves the two equal.

A verb whose work needs much more than its options do (``submit``: the job API, the loader with PyYAML) is two
modules, both named here: its definition (``module:attribute``, a click command with its options and help and no
callback) and its work (``work``, ``module:function``, called with the parsed options and returning the exit
code). :func:`load_verb` gives the command a callback that imports the work by name when the verb runs, as the
group imports the verb itself; so the verb's ``--help`` (which click answers from the command, while parsing)
loads only the definition. Every other verb's module holds both.
"""

from __future__ import annotations

import importlib
from gettext import gettext
from typing import Any, Callable, Dict, List, NamedTuple, Optional

import click

__all__ = ["VERBS", "VERB_TABLE", "Verb", "VerbGroup", "load_verb"]


class Verb(NamedTuple):
    """One verb: ``module`` (in ``malaunch.sdk.cli``) holds its click command as ``attribute``; ``work``, when not
    empty, names the function (``module:function`` in ``malaunch.sdk.cli``) the command calls, kept apart from it."""

    name: str
    module: str
    attribute: str
    short_help: str
    work: str = ""


#: Every verb, in the order of :data:`VERBS` (a did-you-mean's candidates).
VERB_TABLE = (
    Verb("submit", "submit", "submit_cmd",
         "Submit JOB.yaml; follow it and exit with its exit code (unless --detach or --dry-run).",
         "submitting:submit_job"),
    Verb("status", "jobs", "status_cmd", "Show the state of JOB_ID (and of each of its hosts)."),
    Verb("logs", "jobs", "logs_cmd", "Print the output of JOB_ID merged by time, each line prefixed with its host."),
    Verb("stop", "jobs", "stop_cmd",
         "Stop JOB_ID; returns when nothing of it is left running (stopping an ended job is a no-op)."),
    Verb("wait", "jobs", "wait_cmd", "Wait for JOB_ID to end and exit with its exit code."),
    Verb("list", "jobs", "list_cmd",
         "List the jobs of a backend, newest first (jobs whose state cannot be read are noted on stderr)."),
    Verb("delete", "jobs", "delete_cmd", "Delete ended jobs and their files (a running job must be stopped first)."),
    Verb("prune", "jobs", "prune_cmd",
         "Delete every ended job that ended longer ago than --older-than; running jobs are never touched."),
    Verb("sweep", "sweep", "sweep_group", "Run JOB.yaml as many trials with different parameters, and compare them."),
    Verb("events", "inside", "events_cmd",
         "Print what the platform did to JOB_ID, oldest first (scheduling, starts, exits, restarts, root cause)."),
    Verb("top", "inside", "top_cmd",
         "Show what each host of JOB_ID uses: CPU, memory, accelerators where the platform reports them."),
    Verb("exec", "inside", "exec_cmd", "Run COMMAND inside a running host of JOB_ID and exit with its exit code."),
    Verb("notify", "notify", "notify_group",
         "Try the notification targets of a job file or a profile (see docs/cli.md, Notifications)."),
    Verb("configure", "configure", "configure_cmd",
         "Write, list or show named profiles (see 'ma-submit configure --help')."),
    Verb("ui", "ui", "ui_cmd", "Serve a page of your jobs (local, ModelArts, Volcano) on this machine and open it in a "
         "browser."),
    Verb("host", "hostverb", "host_cmd",
         "Lose host HOST of a running local job for good, or bring a lost one back (to try its recovery)."),
    Verb("checkpoints", "ckptverb", "checkpoints_cmd",
         "List the checkpoints of JOB_ID: step, age, size, and whether each is complete (and why not)."),
)  # fmt: skip
VERBS = tuple(verb.name for verb in VERB_TABLE)
_BY_NAME: Dict[str, Verb] = {verb.name: verb for verb in VERB_TABLE}


def _named(module: str, attribute: str) -> Any:
    return getattr(importlib.import_module(f"{__package__}.{module}"), attribute)


def _work(verb: Verb) -> Callable[..., Any]:
    """The callback of ``verb``'s command: its work, imported when the verb runs, called with the parsed options."""
    module, _, function = verb.work.partition(":")

    def run(**options: Any) -> Any:
        return _named(module, function)(**options)

    return run


def load_verb(verb: Verb) -> click.Command:
    """The click command of ``verb``, its module imported now (its work, if named apart, when the verb runs)."""
    command: click.Command = _named(verb.module, verb.attribute)
    if verb.work and command.callback is None:
        command.callback = _work(verb)
    return command


class VerbGroup(click.Group):
    """A click group whose commands are the verbs of :data:`VERB_TABLE`, each imported on first use."""

    def list_commands(self, ctx: click.Context) -> List[str]:
        return sorted(_BY_NAME)

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        command = self.commands.get(cmd_name)
        if command is None and cmd_name in _BY_NAME:
            command = self.commands[cmd_name] = load_verb(_BY_NAME[cmd_name])
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        # A command carrying only the copied text shortens it as the verb's own command would its help.
        rows = [(name, click.Command(name, help=_BY_NAME[name].short_help).get_short_help_str(limit)) for name in names]
        with formatter.section(gettext("Commands")):
            formatter.write_dl(rows)
