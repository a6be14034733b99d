"""What every verb of ``ma-submit`` prints with: a note on stderr, JSON on stdout, the ``--output`` choice, and the
exit code of an interrupted follow. Kept apart from the verbs so that the group (:mod:`.app`) needs none of them."""

from __future__ import annotations

from typing import Any

import click

__all__ = ["EXIT_INTERRUPTED", "OUTPUT", "echo_json", "note"]

#: Following was interrupted (Ctrl-C); the job keeps running.
EXIT_INTERRUPTED = 130
OUTPUT = click.Choice(["text", "json"])


def note(text: str) -> None:
    """A progress or note line on stderr."""
    click.echo(f"ma-submit: {text}", err=True)


def echo_json(data: Any) -> None:
    """Pretty JSON on stdout."""
    import json  # only a verb printing JSON needs it

    click.echo(json.dumps(data, indent=2))
