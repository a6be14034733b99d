"""The table of ``ma-submit``'s verbs (``malaunch.sdk.cli.verbs``) against the commands it names: every verb loads
to its own command, the short help copied into the table is each command's own (at every width the group's help
may shorten it to), no command is left out, and the group lists and finds them as click's group would."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Dict, Optional

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


# Renders the group's help with the group's own context and with click's (whose formatter asks shutil for the
# terminal's width), in a process whose standard output is the terminal or file given, and writes both.
_RENDER = """
import json, sys
import click
from malaunch.sdk.cli import cli
settings = dict(cli.context_settings, info_name="ma-submit")
ours, clicks = cli.context_class(cli, **settings), click.Context(cli, **settings)
widths = [ours.make_formatter().width, clicks.make_formatter().width]
with open(sys.argv[1], "w") as out:
    json.dump({"ours": ours.get_help(), "clicks": clicks.get_help(), "widths": widths}, out)
"""


def _render(tmp_path: Path, columns: Optional[str], tty_columns: Optional[int] = None) -> Dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = columns
    out = tmp_path / "render.json"
    if tty_columns is None:
        with open(tmp_path / "stdout", "w") as stdout:
            subprocess.run([sys.executable, "-c", _RENDER, str(out)], env=env, stdout=stdout, timeout=120, check=True)
    else:
        leader, follower = pty.openpty()
        try:
            fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, tty_columns, 0, 0))
            subprocess.run([sys.executable, "-c", _RENDER, str(out)], env=env, stdout=follower, timeout=120, check=True)
        finally:
            os.close(follower)
            os.close(leader)
    result: Dict[str, object] = json.loads(out.read_text())
    return result


@pytest.mark.parametrize(
    ("columns", "tty_columns", "width"),
    [(None, None, 78), ("100", None, 78), ("60", None, 58), ("20", None, 50), ("junk", None, 78), ("0", None, 78),
     ("-3", None, 78), (None, 63, 61), ("120", 63, 78), ("0", 57, 55)],
)  # fmt: skip
def test_the_groups_help_is_as_wide_as_clicks(
    tmp_path: Path, columns: Optional[str], tty_columns: Optional[int], width: int
) -> None:
    rendered = _render(tmp_path, columns, tty_columns)
    assert rendered["widths"] == [width, width]
    assert rendered["ours"] == rendered["clicks"]
