"""The quick path of ``ma-submit``: the everyday verbs of a job and the group's help without loading click (issue 28).

:func:`recognise` knows only these exact argument lists, each option at most once and in any order:

- ``status JOB_ID [--backend NAME] [--profile NAME] [--output text|json]``
- ``logs JOB_ID [--backend NAME] [--profile NAME] [-f|--follow] [--tail N]``
- ``stop JOB_ID [--backend NAME] [--profile NAME]``
- ``list [--backend NAME] [--profile NAME] [--output text|json] [--limit N]``

(:func:`verb_first` first moves ``--profile``, ``--backend`` and ``--output`` given before the verb after it, on
both paths), where NAME after ``--backend`` is one of the backends' names, a profile's NAME and a JOB_ID are words not
starting with ``-``, and N is decimal digits. The group's own help, ``--help`` or ``-h`` alone on the line, is
recognised by :func:`asks_group_help` when click would render it at the width of the text stored in
:mod:`.help_text` (a terminal of 80 columns or more, or none: :mod:`.width`); :func:`show_group_help` prints that
text as click prints it. Anything else (another word or option, ``--help`` with more on the line, ``--``, an
``--option=value``, a repeated option, a value click would convert otherwise) is declined: click then runs as
it always does, so every usage error still comes from click. A recognised verb gets the parameters click would
give its callback (``tests/sdk/cli/test_cli_quick.py`` compares them with click's own parser), runs the same function
in :mod:`.actions` and ends through :mod:`.exits` as the click path does, byte for byte on stdout and stderr.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any, Callable, Dict, List, NoReturn, Optional, Sequence, Tuple, TypeAlias

from .echo import echo
from .exits import Outcome, finish, json_output_requested, outcome_of, said_write_failure

__all__ = ["Quick", "asks_group_help", "may_run", "recognise", "run", "show_group_help", "verb_first"]

#: (verb, the parameters its function takes as click passes them, the ``--profile`` named or None)
Quick: TypeAlias = "Tuple[str, Dict[str, Any], Optional[str]]"

_VALUES = {"--backend": "backend", "--profile": "profile", "--output": "output", "--limit": "limit", "--tail": "tail"}
_FLAGS = {"-f": "follow", "--follow": "follow"}
#: Each verb's options (by the parameter they set) and whether it takes a JOB_ID.
_VERBS: Dict[str, Tuple[Tuple[str, ...], bool]] = {
    "status": (("backend", "profile", "output"), True),
    "logs": (("backend", "profile", "follow", "tail"), True),
    "stop": (("backend", "profile"), True),
    "list": (("backend", "profile", "output", "limit"), False),
}
#: The completion variable click reads for ``ma-submit`` (completion is click's to answer).
_COMPLETION = "_MA_SUBMIT_COMPLETE"
#: The group's help options (``context_settings`` of the group in :mod:`.app`).
_HELP = ("--help", "-h")


#: The options that may come before the verb (``ma-submit --profile lab list``, as with git), each with a value.
_LEADING = ("--profile", "--backend", "--output")
#: Every verb of ``ma-submit`` (:data:`.verbs.VERBS`, which imports click; a test proves the two equal).
VERB_NAMES = ("submit", "status", "logs", "stop", "wait", "list", "delete", "prune", "sweep", "events", "top", "exec",
              "notify", "configure", "ui", "host", "checkpoints")  # fmt: skip


def verb_first(args: Sequence[str]) -> List[str]:
    """``args`` with the options given before the verb moved after it: ``--profile lab list`` is ``list --profile
    lab``. Only :data:`_LEADING` options (``--profile NAME`` or ``--profile=NAME``) followed by a verb are moved;
    anything else is left as it is (a job file after them is an implicit ``submit``, which takes them as given)."""
    words = list(args)
    at = 0
    while at < len(words) and words[at].split("=", 1)[0] in _LEADING:
        at += 1 if "=" in words[at] else 2
    if 0 < at < len(words) and words[at] in VERB_NAMES:
        return [words[at], *words[:at], *words[at + 1 :]]
    return words


def _defaults(verb: str) -> Dict[str, Any]:
    """The parameters click gives ``verb``'s callback when no option is given."""
    if verb == "status":
        return {"backend": None, "output": "text"}
    if verb == "logs":
        return {"backend": None, "follow": False, "tail": None, "hosts": (), "ranks": ()}
    if verb == "list":
        from ..backends.listing import DEFAULT_LIMIT

        return {"backend": None, "output": "text", "limit": DEFAULT_LIMIT, "states": (), "name": None,
                "since": None, "older_than": None}  # fmt: skip
    return {"backend": None}


def _value(param: str, word: str) -> Optional[Any]:
    """``word`` as option ``param``'s value, or None when it is not one click would take as it is."""
    if param == "backend":
        from ..backends.registry import BACKEND_NAMES

        return word if word in BACKEND_NAMES else None
    if param == "output":
        return word if word in ("text", "json") else None
    if param in ("limit", "tail"):
        return int(word) if word.isascii() and word.isdigit() else None
    return word if word and not word.startswith("-") else None  # a profile's name


def recognise(args: Sequence[str]) -> Optional[Quick]:
    """The verb, its parameters and the profile of ``args`` when they are one of the forms above; else None."""
    if not args or args[0] not in _VERBS:
        return None
    verb, words = args[0], list(args[1:])
    allowed, takes_id = _VERBS[verb]
    given: Dict[str, Any] = {}
    positional: List[str] = []
    while words:
        word = words.pop(0)
        param = _FLAGS.get(word) or _VALUES.get(word)
        if param is None:
            if not word or word.startswith("-"):
                return None
            positional.append(word)
            continue
        if param not in allowed or param in given:
            return None
        if word in _FLAGS:
            given[param] = True
            continue
        value = _value(param, words.pop(0)) if words else None
        if value is None:
            return None
        given[param] = value
    if len(positional) != (1 if takes_id else 0):
        return None
    params = _defaults(verb)
    profile = given.pop("profile", None)
    params.update(given)
    if takes_id:
        params["job_id"] = positional[0]
    return verb, params, profile


def may_run() -> bool:
    """Whether this process may take the quick path at all: not when the shell asks click to complete a word."""
    return not os.environ.get(_COMPLETION)


def _action(verb: str) -> Callable[..., int]:
    from . import actions

    found: Dict[str, Callable[..., int]] = {
        "status": actions.show_status, "logs": actions.show_logs, "stop": actions.stop_job,
        "list": actions.list_jobs,
    }  # fmt: skip
    return found[verb]


class _QuietFlush:
    """A stream whose flush ignores a closed pipe (what click leaves in place of stdout and stderr then)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as error:
            if error.errno != errno.EPIPE:
                raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _end_closed_pipe(error: OSError) -> NoReturn:
    """End as click ends a write into a closed pipe (1, streams made quiet); any other ``error`` is raised again."""
    if error.errno != errno.EPIPE:
        raise error
    sys.stdout = _QuietFlush(sys.stdout)
    sys.stderr = _QuietFlush(sys.stderr)
    sys.exit(1)  # click ends a closed pipe with 1, before the group sees it


def asks_group_help(args: Sequence[str]) -> bool:
    """Whether ``args`` is ``--help`` or ``-h`` alone and click would render the group's help as it is stored."""
    if len(args) != 1 or args[0] not in _HELP:
        return False
    from .help_text import WIDTH
    from .width import help_width

    return help_width() == WIDTH


def show_group_help() -> NoReturn:
    """Print the stored group help and exit as ``ma-submit --help`` exits through click (0; 1 for a closed pipe)."""
    from .help_text import GROUP_HELP

    try:
        echo(GROUP_HELP, quiet_loss=True)
    except OSError as error:
        if said_write_failure(error):
            finish(outcome_of(error), False)
        _end_closed_pipe(error)
    sys.exit(0)


def run(quick: Quick, args: Sequence[str]) -> NoReturn:
    """Run a recognised verb and exit as ``ma-submit`` exits through click (``MaSubmitGroup.main``)."""
    verb, params, profile = quick
    from ..errors import MalaunchError

    outcome: Outcome
    try:
        try:
            outcome = None, _action(verb)(**params, profile=profile), None
        except (EOFError, KeyboardInterrupt):
            echo(err=True)  # click's empty line before it reports the interruption
            raise
        except OSError as error:
            _end_closed_pipe(error)
    except (MalaunchError, KeyboardInterrupt, EOFError, OSError) as error:
        if isinstance(error, OSError) and not said_write_failure(error):  # (a closed pipe ended above)
            raise
        outcome = outcome_of(error)
    finish(outcome, json_output_requested(args))
