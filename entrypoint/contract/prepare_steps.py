"""``MALAUNCH_PREPARE`` and ``MALAUNCH_PREPARE_TIMEOUT``: the commands every host runs before its first attempt.

``MALAUNCH_PREPARE`` is JSON: a list of commands, each an argv (a non-empty list of strings), run in order
(``[["python", "fetch.py", "--to", "/cache"], ["tar", "xf", "/cache/data.tar"]]``). A shell string, for the whole
list or for one command, is refused with one line that says to give a list: the shim never starts a shell.
``MALAUNCH_PREPARE_TIMEOUT`` bounds all the steps of one host together (the contract's seconds row). Pure;
standard library only. What runs them is :mod:`..run.prepare_steps`.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from . import parse_seconds, raw_value
from .errors import ConfigError

__all__ = ["MAX_STEPS", "PrepareSteps", "parse_prepare", "step_text"]

VAR = "MALAUNCH_PREPARE"
MAX_STEPS = 100  # more is a job file gone wrong, not a download list
_MAX_WORDS = 4096
_SHOWN = 120  # a step as a line names it, at most this many characters
_LIST_HINT = ('give a list of commands, each a list of words: [["python", "fetch.py"], ["tar", "xf", "data.tar"]] '
              "(launcher.prepare); for a shell pipeline give [\"sh\", \"-c\", \"...\"] yourself")  # fmt: skip


class PrepareSteps(NamedTuple):
    """The prepare steps of every host: each an argv, in order, and the time they may take together."""

    steps: Tuple[Tuple[str, ...], ...]
    timeout: float

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready form, as ``--dry-run`` shows it."""
        return {"steps": [list(step) for step in self.steps], "timeout": self.timeout}


def step_text(argv: Tuple[str, ...]) -> str:
    """A step's argv as a line names it: its words as a JSON list would show them, shortened."""

    shown = json.dumps(list(argv), ensure_ascii=False)
    return shown if len(shown) <= _SHOWN else shown[: _SHOWN - 4] + "...]"


def parse_prepare(environ: Mapping[str, str]) -> Optional[PrepareSteps]:
    """The prepare steps (None: none given). Pure.

    Raises:
        ConfigError: not JSON, a string instead of a list, an empty command, a word that is not a string (exit 2).
    """
    timeout = parse_seconds(environ, "MALAUNCH_PREPARE_TIMEOUT")  # checked whether or not steps are given
    raw = raw_value(environ, VAR)
    if raw is None:
        return None

    try:
        data = json.loads(raw)
    except ValueError as error:
        if not raw.startswith("["):
            raise ConfigError(VAR, raw, f"expected a JSON list of commands, not a shell string; {_LIST_HINT}") from None
        raise ConfigError(VAR, raw, f"expected a JSON list of commands ({error}); {_LIST_HINT}") from None
    steps = _steps(data, raw)
    return PrepareSteps(steps, timeout) if steps else None


def _steps(data: object, raw: str) -> Tuple[Tuple[str, ...], ...]:
    if isinstance(data, str):
        raise ConfigError(VAR, raw, f"expected a list of commands, not a shell string; {_LIST_HINT}")
    if not isinstance(data, list):
        raise ConfigError(VAR, raw, f"expected a list of commands, got {type(data).__name__}; {_LIST_HINT}")
    if len(data) > MAX_STEPS:
        raise ConfigError(VAR, raw, f"expected at most {MAX_STEPS} commands, got {len(data)}")
    found: List[Tuple[str, ...]] = []
    for number, step in enumerate(data, 1):
        where = f"command {number}"
        if isinstance(step, str):
            raise ConfigError(VAR, raw, f"{where} is a shell string ({step[:60]!r}), not a list of words; "
                              f"{_LIST_HINT}")  # fmt: skip
        if not isinstance(step, list) or not step:
            raise ConfigError(VAR, raw, f"{where} is not a non-empty list of words; {_LIST_HINT}")
        if len(step) > _MAX_WORDS or not all(isinstance(word, str) and "\0" not in word for word in step):
            raise ConfigError(VAR, raw, f"{where} has a word that is not a string (or holds NUL); {_LIST_HINT}")
        if not step[0]:
            raise ConfigError(VAR, raw, f"{where} names no program (its first word is empty); {_LIST_HINT}")
        found.append(tuple(step))
    return tuple(found)
