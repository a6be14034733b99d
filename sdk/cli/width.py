"""The width ``ma-submit``'s group help is formatted to, without click and without :mod:`shutil`.

:func:`help_width` is the width click's formatter takes for a help: the terminal's columns, at most ``limit``
(click's ``max_content_width``, 80 when unset), less 2, at least 50. The columns are found as
:func:`shutil.get_terminal_size` finds them, without importing :mod:`shutil` (with its compressors, 2-4 ms: more
than the rest of rendering the help). The click path (:class:`.verbs.VerbGroup`'s context) and the quick path's
stored help (:mod:`.quick`, :mod:`.help_text`) both ask here, so they agree on when the stored text is the one.
"""

from __future__ import annotations

import os
import sys

__all__ = ["help_width", "terminal_columns"]


def terminal_columns() -> int:
    """``COLUMNS`` when a positive number, else the width of the terminal on standard output, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    stdout = sys.__stdout__
    if stdout is None:
        return 80
    try:
        return os.get_terminal_size(stdout.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):  # closed, detached or no terminal
        return 80


def help_width(limit: int = 80) -> int:
    """The width click formats a help to on this terminal, for a context whose ``max_content_width`` is ``limit``."""
    return max(min(terminal_columns(), limit) - 2, 50)
