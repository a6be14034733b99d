"""The table of ``ma-submit``'s verbs (``malaunch.sdk.cli.verbs``) against the commands it names: every verb loads
to its own command, the short help copied into the table is each command's own (at every width the group's help
may shorten it to), no command is left out, and the group lists and finds them as click's group would."""

from __future__ import annotations

import importlib
import inspect
from typing import Dict

import click
import pytest
from malaunch.sdk.cli import VERBS, cli
from malaunch.sdk.cli.inside import INSIDE_COMMANDS
from malaunch.sdk.cli.jobs import MANAGEMENT_COMMANDS
from malaunch.sdk.cli.verbs import VERB_TABLE, Verb, load_verb

#: Widths a help may shorten a verb's text to: from click's narrowest help (50 columns) to wider than any text.
_LIMITS = range(0, 140)


def test_verbs_keep_their_order() -> None:
    assert VERBS == (
        "submit", "status", "logs", "stop", "wait", "list", "delete", "prune", "sweep", "events", "top", "exec",
        "notify", "configure", "ui", "host", "checkpoints",
    )  # fmt: skip
    assert len(set(VERBS)) == len(VERBS)


@pytest.mark.parametrize("verb", VERB_TABLE, ids=lambda verb: verb.name)
def test_the_table_holds_each_commands_own_short_help(verb: Verb) -> None:
    command = load_verb(verb)
    assert isinstance(command, click.Command) and command.name == verb.name
    assert verb.short_help == command.get_short_help_str(limit=10_000)
    copy = click.Command(verb.name, help=verb.short_help)
    shortened: Dict[int, str] = {limit: command.get_short_help_str(limit) for limit in _LIMITS}
    assert {limit: copy.get_short_help_str(limit) for limit in _LIMITS} == shortened
    assert not command.hidden and not command.deprecated


def test_a_verbs_work_named_apart_takes_its_commands_options() -> None:
    apart = [verb for verb in VERB_TABLE if verb.work]
    assert [verb.name for verb in apart] == ["submit"]
    for verb in apart:
        module, _, function = verb.work.partition(":")
        work = getattr(importlib.import_module(f"malaunch.sdk.cli.{module}"), function)
        command = load_verb(verb)
        assert command.callback is not None and callable(work)
        taken = [name for name in inspect.signature(work).parameters]
        assert taken == [param.name for param in command.params if param.expose_value], verb.name


def test_every_command_of_the_verb_modules_is_in_the_table() -> None:
    by_name = {verb.name: verb for verb in VERB_TABLE}
    for command in (*MANAGEMENT_COMMANDS, *INSIDE_COMMANDS):
        assert command.name in by_name and load_verb(by_name[command.name]) is command, command.name


def test_the_group_lists_and_finds_the_verbs_as_clicks_group_would() -> None:
    ctx = click.Context(cli)
    listed = cli.list_commands(ctx)
    found = {name: cli.get_command(ctx, name) for name in listed}
    assert listed == sorted(VERBS) == click.Group.list_commands(cli, ctx)
    assert all(command is not None and command.name == name for name, command in found.items())
    assert cli.get_command(ctx, "no-such-verb") is None
    assert cli.get_command(ctx, "status") is found["status"]
