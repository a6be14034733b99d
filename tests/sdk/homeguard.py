"""The check behind the root conftest's promise: the user's real ``~/.malaunch`` is not changed by the tests.

:func:`snapshot` records every file of a folder (size, mtime); :func:`changes` says what differs between two.
Standard library only: the root conftest imports it before anything else.
"""

from __future__ import annotations

import os
from typing import Dict, Tuple

__all__ = ["Snapshot", "changes", "snapshot"]

Snapshot = Dict[str, Tuple[int, int]]


def snapshot(folder: str) -> Snapshot:
    """Every file under ``folder``: path -> (size, mtime in ns); empty when the folder does not exist."""
    found: Snapshot = {}
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            found[path] = (info.st_size, info.st_mtime_ns)
    return found


def changes(before: Snapshot, after: Snapshot) -> Dict[str, str]:
    """path -> what happened to it (added, removed, written) between two snapshots."""
    out: Dict[str, str] = {}
    for path in before.keys() | after.keys():
        if path not in before:
            out[path] = "added"
        elif path not in after:
            out[path] = "removed"
        elif before[path] != after[path]:
            out[path] = "written"
    return out
