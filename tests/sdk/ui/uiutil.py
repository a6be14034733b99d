"""Helpers of the page's tests: ``ma-submit ui`` as the user starts it, and a real browser.

:func:`start_ui` starts the real ``ma-submit ui --port 0 --no-browser`` (with the test's home and profiles) and
reads the URL it prints; stopping it presses Ctrl-C and checks the end (exit 130, one line, no traceback). The
browser is Debian's headless Chromium driven by Selenium through Debian's chromedriver
(``scripts/setup.sh`` installs both); it gets a profile folder of its own under the test's temporary folder.
With ``MALAUNCH_UI_SCREENSHOTS=1`` the tests write the screenshots of ``docs/ui.md`` into ``docs/``; without
it they write them under the test's temporary folder, so a normal run leaves the tree clean.
:func:`page_server` runs the page's own server in the test's process over one backend the test made (its calls
counted, say), with :class:`Clock` as a cache's clock that moves when the test says.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple

import requests
from malaunch.sdk.backends.base import Backend
from malaunch.sdk.ui.server import UiServer, start
from sdkutil import REPO, VENV_BIN

__all__ = ["CHROMEDRIVER", "CHROMIUM", "Clock", "Ui", "job_part", "page_server", "screenshot", "start_ui", "stop_ui"]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
_URL = re.compile(r"the jobs page is at (http://\S+) ")


class Ui(NamedTuple):
    """A running ``ma-submit ui``: its process, the URL with the token, and the base URL without it."""

    proc: subprocess.Popen[str]
    url: str
    base: str
    said: List[str]


def start_ui(env: Dict[str, str], *args: str) -> Ui:
    """Start ``ma-submit ui --port 0 --no-browser ARGS`` and wait for the URL it prints."""
    proc = subprocess.Popen([os.path.join(VENV_BIN, "ma-submit"), "ui", "--port", "0", "--no-browser", *args],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=str(REPO))  # fmt: skip
    said: List[str] = []
    assert proc.stderr is not None
    for line in proc.stderr:
        said.append(line)
        found = _URL.search(line)
        if found:
            url = found.group(1)
            return Ui(proc, url, url.split("?", 1)[0].rstrip("/"), said)
    proc.wait()
    raise AssertionError(f"ma-submit ui ended without a URL: {said}")


def stop_ui(ui: Ui) -> str:
    """Ctrl-C: it ends with 130 and one line, no traceback; returns what it said on stderr."""
    ui.proc.send_signal(signal.SIGINT)
    _, err = ui.proc.communicate(timeout=30)
    said = "".join(ui.said) + err
    assert ui.proc.returncode == 130, said
    assert "Traceback" not in said and err.strip() == "ma-submit: the jobs page stopped (the jobs keep running)", said
    return said



def screenshot(driver: object, name: str, tmp_path: Path) -> Path:
    """Save the browser's view as ``docs/<name>.png`` when ``MALAUNCH_UI_SCREENSHOTS=1``, else under ``tmp_path``."""
    folder = REPO / "docs" if os.environ.get("MALAUNCH_UI_SCREENSHOTS") == "1" else tmp_path
    path = folder / f"{name}.png"
    assert driver.save_screenshot(str(path)), path  # type: ignore[attr-defined]
    return path



class Clock:
    """A clock for a cache that moves only when the test adds to ``now``."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextlib.contextmanager
def page_server(name: str, backend: Backend, home: str) -> Iterator[UiServer]:
    """The page's server on 127.0.0.1 (a free port) in this process, showing backend ``name`` as ``backend``."""
    server = start("127.0.0.1", 0, [name], lambda wanted: backend, home)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.app.close()
        server.server_close()


def job_part(session: requests.Session, base: str, backend: str, job_id: str, name: str) -> str:
    """One part of a job's page (``summary``, ``timeline``, ``progress``, ...) as the page's script asks for it."""
    answer = session.get(f"{base}/part", params={"name": name, "b": backend, "id": job_id}, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.text
