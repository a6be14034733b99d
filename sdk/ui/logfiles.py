"""A job's own log files on this machine, and nothing else: listed, opened and read from an offset for following.

Where they are comes from the job's status alone: its ``location`` is its folder (a backend that runs jobs here)
and each host's ``log_file`` lies in that host's folder; the files a page may read are the ``*.log`` files in
those host folders and below (the host's own output and its ranks' logs). A requested path (relative to the job's
folder) is refused (:class:`LogRefused`, one line) unless it lies in one of those folders, ends in ``.log`` and
has no ``..``, ``.`` or empty part; it is then opened one folder at a time below the job's folder, each with
``O_NOFOLLOW`` relative to the one before (no symbolic link is followed anywhere, and no rename in between can
lead the walk outside), and must be a regular file.
"""

from __future__ import annotations

import os
import re
import stat
from typing import List, NamedTuple, Optional, Sequence, Tuple

from ..errors import ConfigError

__all__ = ["CHUNK", "Chunk", "LogRefused", "host_folders", "list_logs", "read_log"]

#: What each part of a served log's path looks like (the last one ends in ``.log``).
_PART = re.compile(r"[A-Za-z0-9_.-]{1,255}\Z")
_DEPTH = 8
#: The most bytes one read returns.
CHUNK = 256 << 10
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class LogRefused(ConfigError):
    """A log path the page may not read."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"log path refused ({why})", path, "pick one of the job's log files on its page")


class Chunk(NamedTuple):
    """Whole lines read from a file, where the next read starts, and the file's size then."""

    lines: Tuple[str, ...]
    offset: int
    size: int


def host_folders(location: str, log_files: Sequence[Optional[str]]) -> List[str]:
    """The folders (relative to the job's folder ``location``) of the hosts whose log file lies inside it."""
    found: List[str] = []
    if not location or not os.path.isabs(location):
        return found
    for log_file in log_files:
        if not log_file or not os.path.isabs(log_file):
            continue
        folder = os.path.relpath(os.path.dirname(os.path.normpath(log_file)), os.path.normpath(location))
        parts = folder.split(os.sep)
        if folder != "." and ".." not in parts and all(_PART.match(part) for part in parts) and folder not in found:
            found.append(folder.replace(os.sep, "/"))
    return found


def _checked(path: str, folders: Sequence[str]) -> List[str]:
    parts = path.split("/")
    if "\x00" in path or path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise LogRefused(path, "only a plain path inside the job's folder, without '..'")
    inside = any(path.startswith(f"{folder}/") for folder in folders)
    if not inside or not path.endswith(".log") or len(parts) > _DEPTH or not all(_PART.match(p) for p in parts):
        raise LogRefused(path, "only the .log files of the job's hosts are served")
    return parts


def _open(job_dir: str, path: str, folders: Sequence[str]) -> int:
    """A descriptor of ``path`` below ``job_dir``, every part opened without following a link."""
    parts = _checked(path, folders)
    try:
        folder = os.open(job_dir, _DIR)
    except OSError as error:
        raise LogRefused(path, f"the job's folder cannot be opened: {error.strerror}") from None
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, _DIR, dir_fd=folder)
            except OSError as error:
                raise LogRefused(path, f"{part!r}: {error.strerror} (links are not followed)") from None
            os.close(folder)
            folder = inner
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=folder)
        except OSError as error:
            raise LogRefused(path, f"{error.strerror} (links are not followed)") from None
    finally:
        os.close(folder)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise LogRefused(path, "not a regular file")
    return fd


def read_log(job_dir: str, folders: Sequence[str], path: str, offset: int, search: Optional[str] = None,
             limit: int = CHUNK) -> Chunk:  # fmt: skip
    """The whole lines of ``path`` (in one of the host ``folders``) from byte ``offset`` (at most ``limit`` bytes; a
    longer line comes cut), those holding ``search`` only when given (case-insensitive)."""
    fd = _open(job_dir, path, folders)
    try:
        size = os.fstat(fd).st_size
        start = offset if 0 <= offset <= size else 0  # a file that shrank (rewritten) is read again
        data = os.pread(fd, limit, start)
    finally:
        os.close(fd)
    end = data.rfind(b"\n") + 1
    if end == 0 and len(data) == limit:  # one line longer than a chunk: give what there is
        end = len(data)
    text = data[:end].decode("utf-8", errors="replace")
    lines = text.splitlines()
    if search:
        wanted = search.casefold()
        lines = [line for line in lines if wanted in line.casefold()]
    return Chunk(tuple(lines), start + end, size)


def list_logs(job_dir: str, folders: Sequence[str]) -> List[str]:
    """The log files :func:`read_log` serves (paths relative to ``job_dir``), host folder by host folder, each
    folder's own files first; no link is followed."""
    found: List[str] = []
    for base in folders:
        for folder, dirs, files in os.walk(os.path.join(job_dir, base)):  # os.walk follows no links
            dirs.sort()
            relative = os.path.relpath(folder, job_dir).replace(os.sep, "/")
            for file in sorted(files):
                candidate = f"{relative}/{file}"
                if file.endswith(".log") and not os.path.islink(os.path.join(folder, file)):
                    try:
                        _checked(candidate, folders)
                    except LogRefused:
                        continue
                    found.append(candidate)
    return found
