"""The console script ``ma-submit``: the quick path (:mod:`.quick`) for the group's help and the everyday verbs it
recognises, else click (:func:`.app.main`) for everything, exactly as before. Neither this module nor the quick path
imports click.

A Ctrl-C at any moment of the run, the imports included, ends it as one after the start does: ``ma-submit: error:
interrupted`` and 130, never a traceback.
"""

from __future__ import annotations

import sys
from typing import List, Optional, Sequence

__all__ = ["main"]


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Console-script entry point (``ma-submit``); ``argv``: the arguments (default: ``sys.argv[1:]``)."""
    args: List[str] = list(sys.argv[1:] if argv is None else argv)
    try:
        _run(args)
    except KeyboardInterrupt:  # before a verb's own handling began (the imports): as when it is following a job
        from .exits import finish, json_output_requested, outcome_of

        finish(outcome_of(KeyboardInterrupt()), json_output_requested(args))


def _run(args: List[str]) -> None:
    from . import quick

    args = quick.verb_first(args)  # options given before the verb go after it
    if quick.may_run() and quick.asks_group_help(args):
        quick.show_group_help()
    found = quick.recognise(args) if quick.may_run() else None
    if found is not None:
        quick.run(found, args)
    from .app import main as click_main  # every other argument list, and every usage error, is click's

    click_main(args)
