"""The SDK's home on this machine, ``$MALAUNCH_HOME`` (default ``~/.malaunch``), and how its files are kept.

Everything the SDK keeps between processes lives under the home: the local backend's jobs (``jobs/<id>/``), the
sweeps' records (``sweeps/<id>/``) and the job index (``job-index.json``). This module is the one place that

- resolves the home (:func:`home_dir`: a folder given, else ``$MALAUNCH_HOME``, else ``~/.malaunch``; absolute);
- writes a JSON file so that a reader sees the old file or the new one, never half of one, and it survives a
  crash (:func:`write_json_atomic`, the shim's atomic write);
- serialises writers across processes with an exclusive ``flock`` on a lock file (:func:`file_lock`);
- picks the one name of a folder that a unique prefix stands for (:func:`one_by_prefix`).
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import json
import os
from typing import Any, Iterator, Mapping, Optional, Sequence

from malaunch.entrypoint.public import write_atomic

from .errors import ConfigError

__all__ = ["DEFAULT_HOME", "HOME_VARIABLE", "close_id", "file_lock", "home_dir", "one_by_prefix", "write_json_atomic"]

#: The variable that moves the home.
HOME_VARIABLE = "MALAUNCH_HOME"
#: The home when the variable is unset or empty.
DEFAULT_HOME = os.path.join("~", ".malaunch")


def home_dir(environ: Mapping[str, str], given: Optional[str] = None) -> str:
    """``given``, else ``$MALAUNCH_HOME``, else ``~/.malaunch``, as an absolute path (``~`` expanded)."""
    raw = given or environ.get(HOME_VARIABLE) or DEFAULT_HOME
    return os.path.abspath(os.path.expanduser(raw))


def write_json_atomic(
    path: str, data: Any, slack: int = 0, *, indent: int = 2, sort_keys: bool = True, prefix: str = ".tmp-"
) -> None:
    """Write ``data`` as JSON (mode 0600, flushed to disk) so readers see the old or the new file, never half.

    ``slack``: blanks after the JSON (room to rewrite the file in place later); ``prefix``: how the temporary
    file's name starts. Raises ``OSError`` with ``path`` unchanged.
    """
    text = json.dumps(data, indent=indent, sort_keys=sort_keys) + "\n" + " " * slack
    write_atomic(path, text, mode=0o600, durable=True, prefix=prefix)


@contextlib.contextmanager
def file_lock(path: str, mode: int = 0o600, *, shared: bool = False, wait: bool = True) -> Iterator[bool]:
    """Hold a ``flock`` on the file ``path`` (created if missing; its folder must exist): exclusive, or ``shared``
    with other shared holders. It blocks while another process holds it, unless ``wait`` is False: then it yields
    False, holding nothing. Raises ``OSError`` when the lock file cannot be opened."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # closing releases the lock


def one_by_prefix(prefix: str, names: Sequence[str], kind: str) -> Optional[str]:
    """The one of ``names`` that starts with ``prefix`` (None: none does); several: a ConfigError listing them."""
    matches = [name for name in names if name.startswith(prefix)]
    if len(matches) > 1:
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise ConfigError(
            f"{kind} id prefix {prefix!r} matches {len(matches)} {kind}s ({shown})", prefix, "give more of the id"
        )
    return matches[0] if matches else None


#: How alike an id given and a job's must be for a did-you-mean (difflib's ratio): a character or two of a
#: whole id wrong, missing or extra (0.92 to 0.98); ids of other jobs of the day share their date, about 0.6.
_CLOSE_ID = 0.85


def close_id(given: str, names: Sequence[str]) -> Optional[str]:
    """The one of ``names`` that ``given`` is a slip of the keyboard away from, for a did-you-mean (None: none is
    that close; the closest when several are)."""
    close = difflib.get_close_matches(given, names, n=1, cutoff=_CLOSE_ID)
    return close[0] if close else None
