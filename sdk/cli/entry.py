"""The console script ``ma-submit`` (``sdk/ma-submit``) calls :func:`main`: the click group of :mod:`.app`, which
loads each verb's module when that verb runs or its help is asked (:mod:`.verbs`).

A Ctrl-C at any moment of the run ends it as one after the start does: ``ma-submit: error: interrupted`` and 130,
never a traceback (before this module is imported, the console script holds SIGINT itself).
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from .app import main as click_main
from .exits import finish, json_output_requested, outcome_of

__all__ = ["main"]


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Console-script entry point (``ma-submit``); ``argv``: the arguments (default: ``sys.argv[1:]``)."""
    try:
        click_main(argv)
    except KeyboardInterrupt:  # before the group's own handling began: as when it is following a job
        finish(outcome_of(KeyboardInterrupt()), json_output_requested(sys.argv[1:] if argv is None else argv))
