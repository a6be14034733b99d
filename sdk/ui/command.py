"""The ``ui`` verb of ``ma-submit`` as a click command (registered in :mod:`malaunch.sdk.cli.verbs`).

It decides which backends the page shows (local; each ``--backend``; the profile's backend; every backend this
machine's job index recorded a job for) and how each is opened (as every verb opens it, with the profile in use),
binds the server and serves until Ctrl-C (exit 130, one line, no traceback). A port in use or an address that
cannot be bound is one error line (exit 2).
"""

from __future__ import annotations

import contextlib
import os
from typing import List, Optional, Tuple

import click

from ..backends.job_index import JobIndex
from ..backends.registry import BACKEND_NAMES, DEFAULT_BACKEND
from ..cli.echo import note
from ..cli.exits import EXIT_INTERRUPTED
from ..cli.profile_option import chosen_profile, profile_option
from ..cli.profile_use import backend_of_profile, open_with
from ..errors import MalaunchError
from ..home import home_dir
from .server import serve, start

__all__ = ["DEFAULT_PORT", "shown_backends", "ui_cmd"]

#: The port ``ma-submit ui`` listens on unless told.
DEFAULT_PORT = 8765


def shown_backends(given: Tuple[str, ...], profile: Optional[str], home: str) -> List[str]:
    """Local first, then each backend named, the profile's and those the job index has jobs of, once each."""
    names = [DEFAULT_BACKEND, *given]
    with contextlib.suppress(MalaunchError):  # a broken profile: every backend opened with it shows its error
        names.append(backend_of_profile(profile))
    names.extend(entry["backend"] for entry in JobIndex.default(os.environ, home).entries().values())
    return [name for name in BACKEND_NAMES if name in names]


@click.command("ui")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="The port to listen on; 0 picks a free one.")  # fmt: skip
@click.option("--host", default="127.0.0.1", show_default=True, metavar="ADDR",
              help="The address to listen on; anything but the loopback lets other machines reach the page.",
              )  # fmt: skip
@click.option("--no-browser", is_flag=True, help="Print the page's address; do not open a browser.")
@click.option("--backend", "backends", type=click.Choice(BACKEND_NAMES), multiple=True,
              help="Show this backend's jobs too (repeatable). Always shown: local, the profile's backend and "
              "every backend this machine submitted to.")  # fmt: skip
@profile_option
def ui_cmd(port: int, host: str, no_browser: bool, backends: Tuple[str, ...]) -> int:
    """Serve a page of your jobs (local, ModelArts, Volcano) on this machine and open it in a browser.

    Every request needs the token printed at start (the printed URL carries it once, then a cookie keeps it).
    Ctrl-C stops the page; the jobs keep running. See docs/ui.md."""
    profile = chosen_profile()
    home = home_dir(os.environ)
    server = start(host, port, shown_backends(backends, profile, home), lambda name: open_with(name, profile), home)
    try:
        serve(server, lambda text: note(text), open_browser=not no_browser)
    except KeyboardInterrupt:
        note("the jobs page stopped (the jobs keep running)")
        return EXIT_INTERRUPTED
    return 0
