"""The ``--output text|json`` choice the verbs share (a click type, so apart from :mod:`.echo`, which is free of
click), kept out of the verb modules so that a verb's own ``--help`` loads no other verb."""

from __future__ import annotations

import click

__all__ = ["OUTPUT"]

OUTPUT = click.Choice(["text", "json"])
