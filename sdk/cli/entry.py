"""The console script ``ma-submit`` (``sdk/ma-submit``) calls :func:`main`: the click group of :mod:`.app`, which
loads each verb's module when that verb runs or its help is asked (:mod:`.verbs`).

A Ctrl-C at any moment of the run ends it as one after the start does: ``ma-submit: error: interrupted`` and 130,
never a traceback (before this module is imported, the console script holds SIGINT itself). Python cannot raise
an exception out of a finaliser or a weak reference's callback (the import system runs one when a module's lock
goes): a Ctrl-C that lands there was printed as ``Exception ignored in: ...`` with a traceback, and then lost.
:func:`interrupts_kept` raises it again at once, where it can end the run.
"""

from __future__ import annotations

import _thread
import signal
import sys
import threading
import time
from typing import Any, Callable, Optional, Sequence

from .app import main as click_main
from .exits import finish, json_output_requested, outcome_of

__all__ = ["AGAIN_AFTER", "interrupts_kept", "main"]


#: Seconds after which a Ctrl-C Python could not raise comes again: the callback it landed in has returned by then.
AGAIN_AFTER = 0.01


def _interrupt_again() -> None:
    time.sleep(AGAIN_AFTER)
    _thread.interrupt_main(signal.SIGINT)


def interrupts_kept(previous: Callable[[Any], object]) -> Callable[[Any], None]:
    """An ``sys.unraisablehook`` that sends a Ctrl-C Python could not raise (in a finaliser or a weak reference's
    callback) to the main thread again a moment later, from a thread of its own (sent from the hook, it would land in
    the hook, where it cannot be raised either), instead of it being printed and lost; anything else goes to
    ``previous``."""

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            threading.Thread(target=_interrupt_again, name="ctrl-c-again", daemon=True).start()
            return
        previous(unraisable)

    return hook


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Console-script entry point (``ma-submit``); ``argv``: the arguments (default: ``sys.argv[1:]``)."""
    sys.unraisablehook = interrupts_kept(sys.unraisablehook)  # a Ctrl-C in a callback is not lost
    try:
        click_main(argv)
    except KeyboardInterrupt:  # before the group's own handling began: as when it is following a job
        finish(outcome_of(KeyboardInterrupt()), json_output_requested(sys.argv[1:] if argv is None else argv))
