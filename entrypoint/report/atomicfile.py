"""The one atomic write of malaunch: readers see the old file or the new one, never half of one.

The text goes to a fresh temporary file in the target's folder (so the rename stays on one file system) and is
renamed over the target. The temporary file is removed when anything fails, and the error is raised to the
caller, who knows what to say about it. ``durable=True`` also flushes the file and its folder to disk, so the
new file survives a crash of the machine (state the SDK reads back later); the shim's own files need not.

Used by the shim (run report, attempt files, rank-table copies) and by the SDK (local
job state, plans, sweep records, the job index): the SDK may import the entrypoint, never the other way round.
Standard library only and cheap to import (no :mod:`tempfile`): the shim writes before its first rank starts.
"""

from __future__ import annotations

import contextlib
import os
from typing import Optional

__all__ = ["write_atomic"]

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def write_atomic(
    path: str, text: str, *, mode: Optional[int] = None, durable: bool = False, prefix: str = ".tmp-"
) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically, making its folder if needed.

    Args:
        path: the file to write.
        text: its whole new content.
        mode: the new file's permissions, exactly (the umask does not apply); ``None``: ``0o666`` less the umask,
            as :func:`open` would create it.
        durable: flush the file and its folder to disk before returning.
        prefix: how the temporary file's name starts (it ends with the writer's pid, random hex and ``.tmp``).

    Raises:
        OSError: the folder or the file could not be written; ``path`` is unchanged and no temporary file is left.
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    temp = os.path.join(folder, f"{prefix}{os.getpid()}-{os.urandom(4).hex()}.tmp")
    fd = os.open(temp, _FLAGS, 0o666 if mode is None else mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if durable:
        _sync_folder(folder)


def _sync_folder(folder: str) -> None:
    """Flush the folder's entry for the renamed file (best effort: some file systems refuse)."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
