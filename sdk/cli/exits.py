"""How ``ma-submit`` ends: the one place a failure becomes its line and its exit code (no click here).

:func:`outcome_of` maps what a verb raised (an SDK error, an interruption, a closed pipe) to the message, the exit
code and the job-file field; :func:`finish` prints ``ma-submit: error: <message>`` on stderr (under ``--output
json`` also ``{"error": ..., "field": ..., "exit_code": ...}`` on stdout) and exits. ``MaSubmitGroup.main``
(which adds click's own usage errors) ends through here.
"""

from __future__ import annotations

import errno
import sys
from typing import NoReturn, Optional, Sequence, Tuple, TypeAlias, Union

from ...entrypoint.public import OutputCut
from ..errors import MalaunchError, SpecError, exit_code_for
from .echo import echo, echo_json

__all__ = ["EXIT_INTERRUPTED", "EXIT_OUTPUT", "EXIT_PIPE", "PROG", "finish", "json_output_requested",
           "outcome_of", "said_write_failure"]  # fmt: skip

PROG = "ma-submit"
#: Following or waiting was interrupted (the job keeps running).
EXIT_INTERRUPTED = 130
#: Whoever read the output went away (a closed pipe) and nothing said so.
EXIT_PIPE = 141
#: The output stopped midway (a closed pipe, a full disk) and a line on stderr said where: 1, as click ends a closed
#: pipe.
EXIT_OUTPUT = 1

_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)

#: (message or None, exit code, the job-file field the message is about or None)
Outcome: TypeAlias = "Tuple[Optional[str], int, Optional[str]]"


def json_output_requested(args: Sequence[str]) -> bool:
    """True when ``--output json`` is among the options (words after ``--`` belong to the script)."""
    words = list(args)
    if "--" in words:
        words = words[: words.index("--")]
    pairs = zip(words, [*words[1:], ""])
    return "--output=json" in words or any(a == "--output" and b == "json" for a, b in pairs)


def _full_disk(error: OSError) -> bool:
    """A write that failed for want of space (a full disk, a quota, a file size limit): never a traceback."""
    return error.errno in _FULL


def said_write_failure(error: OSError) -> bool:
    """A failed write ``ma-submit`` ends with its line and :data:`EXIT_OUTPUT` (:func:`outcome_of`), not a
    traceback: output cut midway (``OutputCut``), or any write that failed for want of space."""
    return isinstance(error, OutputCut) or _full_disk(error)


def outcome_of(error: Union[MalaunchError, KeyboardInterrupt, EOFError, OSError]) -> Outcome:
    """What ``error`` ends ``ma-submit`` with: an SDK error's message and code, ``interrupted`` (130) for an
    interruption, no message and 1 for output that stopped midway (``OutputCut``: its line was said where it
    stopped), a message and 1 for a full disk under a writer of click's (``--help``, ``--version``), no message
    and 141 for any other closed pipe."""
    if isinstance(error, MalaunchError):
        return str(error), exit_code_for(error), error.field if isinstance(error, SpecError) else None
    if isinstance(error, (KeyboardInterrupt, EOFError)):
        return "interrupted", EXIT_INTERRUPTED, None
    if isinstance(error, OutputCut):
        return None, EXIT_OUTPUT, None
    if _full_disk(error) and error.filename:
        where = str(error.filename)[-80:]
        return f"a write to {where!r} failed: {error.strerror}; free space there and run it again", EXIT_OUTPUT, None
    if _full_disk(error):
        return f"a write failed: {error.strerror}; free space or send the output elsewhere", EXIT_OUTPUT, None
    return None, EXIT_PIPE, None


def finish(outcome: Outcome, json_mode: bool) -> NoReturn:
    """Print ``outcome``'s message (if any) as the error line, and its JSON object under ``json_mode``; exit."""
    message, code, field = outcome
    if message is not None:
        try:
            echo(f"{PROG}: error: {message}", err=True)
            if json_mode:
                echo_json({"error": message, "field": field, "exit_code": code})
        except OSError:  # stderr (or stdout) went the same way: nothing can be said, the exit code still tells
            pass
    sys.exit(code)
