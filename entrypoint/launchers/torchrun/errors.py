"""torchrun's per-worker error files (``TORCHELASTIC_ERROR_FILE``), read defensively as root-cause facts.

torchrun gives every worker ``<--log_dir>/<run id>_<random>/attempt_<n>/<local rank>/error.json``;
``torch.distributed.elastic.multiprocessing.errors.record`` writes it when the worker's entry function raises:
``{"message": {"message": "ValueError: ...", "extraInfo": {"py_callstack": ..., "timestamp": ...}}}``. The path
is known from the worker's own environment (read by the watch) or found under torchrun's log directory.
Everything of one attempt sits in its own ``attempt_<n>/`` folder: torchrun restarts the group with a new
``TORCHELASTIC_RESTART_COUNT`` and a fresh folder, so a file's path says which attempt it belongs to. With
``--redirects=3`` (the shim's plan) every worker's stdout and stderr *are* ``<local rank>/stdout.log`` and
``stderr.log`` there, complete when it dies (the shim follows them: :mod:`.logs`).
"""


import glob
import json
import os
from collections import deque
from typing import List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .stub import noted_rank

__all__ = ["ErrorRecord", "attempt_of", "read_error_files", "torchrun_log_dir", "worker_output_tail"]

_ATTEMPT_PREFIX = "attempt_"


class ErrorRecord(NamedTuple):
    """One error file of this run: the rank, its attempt (None: the path does not say) and the exception."""

    rank: int
    attempt: Optional[int]
    message: str


def attempt_of(path: str) -> Optional[int]:
    """The attempt an error file belongs to: the ``attempt_<n>`` folder above its local-rank folder."""
    name = os.path.basename(os.path.dirname(os.path.dirname(path)))
    number = name[len(_ATTEMPT_PREFIX) :] if name.startswith(_ATTEMPT_PREFIX) else ""
    return int(number) if number.isascii() and number.isdigit() else None


def read_error_files(
    known: Mapping[str, int], argv: Sequence[str], ranks: Sequence[int], since: float
) -> List[ErrorRecord]:
    """Every error file of this run (written at or after ``since``) that recorded an exception, by path.

    ``known`` maps the paths the workers' environments named to their ranks; torchrun's ``--log_dir`` in
    ``argv`` is searched for the rest (the rank the worker's start noted beside it, else local rank ``i`` is
    ``ranks[i]``).
    """
    paths = dict(known)
    log_dir = torchrun_log_dir(argv)
    if log_dir:
        for path in glob.glob(os.path.join(glob.escape(log_dir), "*", "attempt_*", "*", "error.json")):
            local = os.path.basename(os.path.dirname(path))
            noted = noted_rank(os.path.dirname(path))  # the rank the worker saw (elastic: not its place)
            if noted is not None or (local.isdigit() and int(local) < len(ranks)):
                paths.setdefault(path, noted if noted is not None else ranks[int(local)])
    found = []
    for path, rank in sorted(paths.items()):
        message = _error_message(path, since)
        if message:
            found.append(ErrorRecord(rank, attempt_of(path), message))
    return found


def worker_output_tail(error_file: Optional[str], lines: int = 50) -> Tuple[str, ...]:
    """The last lines a torchrun worker wrote itself (``stdout.log``, then ``stderr.log`` next to its error
    file), plus the exception its error file recorded; empty when there are none."""
    if not error_file:
        return ()
    folder = os.path.dirname(error_file)
    found: List[str] = []
    for name in ("stdout.log", "stderr.log"):
        try:
            with open(os.path.join(folder, name), "rb") as handle:
                handle.seek(max(0, os.fstat(handle.fileno()).st_size - (64 << 10)))
                tail = deque(handle, maxlen=lines)
        except OSError:
            continue
        found += [raw.rstrip(b"\r\n").decode("utf-8", errors="replace") for raw in tail]
    message = _error_message(error_file, 0.0)
    return (*found[-lines:], *([message] if message else []))


def torchrun_log_dir(argv: Sequence[str]) -> Optional[str]:
    """The value of torchrun's ``--log_dir``/``--log-dir`` in ``argv`` (the last one wins)."""
    value = None
    tokens = list(argv)
    for index, token in enumerate(tokens):
        if token == "--":
            break
        name = token[2:].split("=", 1)[0].replace("-", "_") if token.startswith("--") else ""
        if name == "log_dir":
            value = token.split("=", 1)[1] if "=" in token else (tokens[index + 1] if index + 1 < len(tokens) else None)
    return value


def _error_message(path: str, since: float) -> Optional[str]:
    """The exception an error file of this run recorded (``message.message``), read defensively."""
    try:
        if os.stat(path).st_mtime < since - 1.0:
            return None  # left over from an earlier run
        with open(path, encoding="utf-8", errors="replace") as handle:
            data = json.loads(handle.read(1 << 20))
    except (OSError, ValueError):
        return None
    message = data.get("message") if isinstance(data, dict) else None
    text = message.get("message") if isinstance(message, dict) else message
    return str(text)[:500] if text else None
