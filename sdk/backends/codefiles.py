"""Which files of a code folder a job takes along, with their sizes and content hashes.

Shared by the backends that copy or upload code. Excluded: ``.git``, ``__pycache__``, ``*.pyc`` and the tool
caches (:data:`DEFAULT_EXCLUDES`), plus the patterns of a ``.malaunchignore`` file at the top of the folder,
in gitignore syntax (``!pattern`` re-includes). Symlinked folders are not entered; symlinked files are taken
by their content. The result is sorted by relative path, so two listings of unchanged code are equal.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import List, Sequence, Tuple

from ..errors import BackendError
from .ignorefile import IgnoreRules

__all__ = [
    "DEFAULT_EXCLUDES", "IGNORE_FILE", "CodeFile", "exclude_patterns", "file_sha256", "select_code_files",
]  # fmt: skip

DEFAULT_EXCLUDES: Tuple[str, ...] = (
    ".git/", "__pycache__/", "*.pyc", ".mypy_cache/", ".pytest_cache/", ".ruff_cache/",
)  # fmt: skip
IGNORE_FILE = ".malaunchignore"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class CodeFile:
    """One file: ``relpath`` uses ``/`` separators; ``sha256`` is empty when hashes were not asked for."""

    relpath: str
    path: str
    size: int
    sha256: str = ""


def exclude_patterns(root: str) -> Tuple[str, ...]:
    """The default excludes followed by the lines of ``root/.malaunchignore`` (when it exists)."""
    extra: List[str] = []
    try:
        with open(os.path.join(root, IGNORE_FILE), encoding="utf-8") as handle:
            extra = [line.rstrip("\n") for line in handle]
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError) as exc:
        raise BackendError(f"cannot read {os.path.join(root, IGNORE_FILE)}: {exc}; fix or remove it") from None
    return DEFAULT_EXCLUDES + tuple(extra)


def file_sha256(path: str) -> str:
    """Hex SHA-256 of a file's content."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(_CHUNK)
            if not chunk:
                return digest.hexdigest()
            digest.update(chunk)


def select_code_files(root: str, *, hashes: bool = True, patterns: Sequence[str] = ()) -> List[CodeFile]:
    """The files under ``root`` a job takes along (see the module docstring).

    Raises:
        BackendError: ``root`` is not a folder, or a file cannot be read.
    """
    if not os.path.isdir(root):
        raise BackendError(f"code_dir {root!r} is not a folder; give the folder with your code")
    rules = IgnoreRules(list(patterns) or exclude_patterns(root))
    found: List[CodeFile] = []
    for folder, dirs, names in os.walk(root):
        rel_folder = os.path.relpath(folder, root)
        prefix = "" if rel_folder == "." else rel_folder.replace(os.sep, "/") + "/"
        dirs[:] = sorted(
            d
            for d in dirs
            if not os.path.islink(os.path.join(folder, d)) and not rules.ignored(f"{prefix}{d}", is_dir=True)
        )
        for name in names:
            rel = prefix + name
            path = os.path.join(folder, name)
            if rules.ignored(rel) or not os.path.isfile(path):
                continue
            try:
                size = os.path.getsize(path)
                digest = file_sha256(path) if hashes else ""
            except OSError as exc:
                raise BackendError(f"cannot read {path}: {exc.strerror}; check its permissions") from None
            found.append(CodeFile(rel, path, size, digest))
    return sorted(found, key=lambda item: item.relpath)

