"""``ma-submit notify test JOB_FILE_OR_PROFILE``: a sample event to every target of a job file or a profile.

One line per target: ``ok`` or ``FAILED``, the target (a URL's scheme and host only), the tries and what
happened. Exit 0 when every target took it, 3 when any did not (2: no targets, or a job file that cannot be read).
"""

from __future__ import annotations

import os

import click

from ..notify.trial import notify_test, targets_of
from .echo import echo
from .profile_option import chosen_profile, profile_option

__all__ = ["notify_group"]

_EXIT_FAILED = 3


@click.group("notify", no_args_is_help=True)
def notify_group() -> None:
    """Try the notification targets of a job file or a profile (see docs/cli.md, Notifications)."""


@notify_group.command("test")
@profile_option
@click.argument("source", metavar="JOB_FILE_OR_PROFILE")
def test_cmd(source: str) -> int:
    """Send a sample event to every target of JOB_FILE_OR_PROFILE and report each result."""
    found = targets_of(source, os.environ, chosen_profile())
    results = notify_test(found, os.environ)
    for result in results:
        tries = f"{result.tries} tr{'y' if result.tries == 1 else 'ies'}"
        echo(f"{'ok    ' if result.ok else 'FAILED'}  {result.target}  ({tries}): {result.detail}")
    return 0 if all(result.ok for result in results) else _EXIT_FAILED
