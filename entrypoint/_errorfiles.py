"""torchrun's per-worker error files (``TORCHELASTIC_ERROR_FILE``), read defensively as root-cause facts.

torchrun gives every worker ``<--log_dir>/<run id>_<random>/attempt_<n>/<local rank>/error.json``;
``torch.distributed.elastic.multiprocessing.errors.record`` writes it when the worker's entry function raises:
``{"message": {"message": "ValueError: ...", "extraInfo": {"py_callstack": ..., "timestamp": ...}}}``. The path
is known from the worker's own environment (read by the watch) or found under torchrun's log directory.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Dict, Mapping, Optional, Sequence

__all__ = ["read_error_files", "torchrun_log_dir"]


def read_error_files(
    known: Mapping[int, str], argv: Sequence[str], ranks: Sequence[int], since: float
) -> Dict[int, str]:
    """``rank -> exception message`` for every error file of this run (written at or after ``since``).

    ``known`` maps ranks to the paths their environment named; torchrun's ``--log_dir`` in ``argv`` is searched
    for the rest (local rank ``i`` is ``ranks[i]``).
    """
    paths = dict(known)
    log_dir = torchrun_log_dir(argv)
    if log_dir:
        for path in glob.glob(os.path.join(glob.escape(log_dir), "*", "attempt_*", "*", "error.json")):
            local = os.path.basename(os.path.dirname(path))
            if local.isdigit() and int(local) < len(ranks):
                paths.setdefault(ranks[int(local)], path)
    found = {}
    for rank, path in paths.items():
        message = _error_message(path, since)
        if message:
            found[rank] = message
    return found


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
