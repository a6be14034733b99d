"""The console script ``ma-submit``: the quick path (:mod:`.quick`) for the group's help and the everyday verbs it
recognises, else click (:func:`.app.main`) for everything, exactly as before. Neither this module nor the quick path
imports click.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Sequence

__all__ = ["main"]


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Console-script entry point (``ma-submit``); ``argv``: the arguments (default: ``sys.argv[1:]``)."""
    from . import quick

    args = quick.verb_first(sys.argv[1:] if argv is None else argv)  # options before the verb go after it
    if quick.may_run() and quick.asks_group_help(args):
        quick.show_group_help()
    found = quick.recognise(args) if quick.may_run() else None
    if found is not None:
        quick.run(found, args)
    from .app import main as click_main  # every other argument list, and every usage error, is click's

    click_main(args)
