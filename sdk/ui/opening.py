"""How the browser is sent to the page without the token on its command line.

A browser keeps the command line it was started with for its life, and any user of the machine can read it
(``ps``); on the loopback the token is all that guards the page. So, as Jupyter does, the browser is given a file
of the user's own: ``<home>/ui/open-<port>.html`` (the folder mode 0700, the file 0600), which sends it on to the
URL with the token at once. The file is removed when the page stops.
"""

from __future__ import annotations

import contextlib
import os

from .markup import html

__all__ = ["open_file", "remove_open_file"]

_TEMPLATE = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={url}">'
    '<title>malaunch</title></head><body><p><a href="{url}">Open the jobs page</a></p></body></html>\n'
)


def open_file(home: str, port: int, url: str) -> str:
    """Write the file that sends a browser on to ``url`` (see the module's docstring); its path."""
    folder = os.path.join(home, "ui")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    path = os.path.join(folder, f"open-{port}.html")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # another user's file or a link in its place is never written through
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(html(_TEMPLATE, url=url))
    return path


def remove_open_file(path: str) -> None:
    """Remove the file (gone already: nothing to do)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
