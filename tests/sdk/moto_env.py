"""moto's S3 server for the tests: a real HTTP server in its own process on 127.0.0.1, started once per session (per
xdist worker) and emptied for each test that takes :func:`moto_s3`. Apart from :mod:`modelarts_env` (which gives
these fixtures on, with the fake ModelArts API's) so that a session that needs only moto's server, as
tests/sdk/modelarts/test_moto_fixture.py starts one, does not import the ModelArts SDK's models for the fake API
(0.4 s of CPU a session)."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, Optional

import pytest
from procutil import SESSION_SERVER_VAR
from sdkutil import VENV_BIN

__all__ = ["moto_process", "moto_s3", "moto_server"]


#: How moto's server (werkzeug) says where it listens, once it does.
_LISTENING = re.compile(rb"Running on http://127\.0\.0\.1:(\d+)")


def _port_said(log_path: Path) -> Optional[int]:
    found = _LISTENING.search(log_path.read_bytes()) if log_path.exists() else None
    return int(found.group(1)) if found else None


@contextlib.contextmanager
def moto_process(log_path: Path, env: Optional[Dict[str, str]] = None) -> Iterator[str]:
    """moto's server on 127.0.0.1 (a real HTTP server in its own process); yields its URL.

    It binds a port the kernel picks (``-p 0``) and says which in its log: no port chosen here first, which another
    worker's server could take before moto binds it (the tests would then talk to that server)."""
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [os.path.join(VENV_BIN, "moto_server"), "-H", "127.0.0.1", "-p", "0"],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            port = _port_said(log_path)
            if port is not None:
                with contextlib.suppress(OSError):
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto_server did not start: {log_path.read_text()}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's server on 127.0.0.1, started once per session (per xdist worker): each start imports moto, Flask and
    every moto backend (about 0.6 s of CPU, 2 s or more on a loaded machine) and each stop waits for it to end.
    Tests take :func:`moto_s3`, which empties it first."""
    env = dict(os.environ, **{SESSION_SERVER_VAR: "1"})  # the process checks of later tests pass over it
    with moto_process(tmp_path_factory.mktemp("moto") / "moto.log", env) as url:
        yield url


@pytest.fixture
def moto_s3(moto_server: str) -> str:
    """moto's S3 server on 127.0.0.1 (a real HTTP server in its own process), as new: no bucket, no object, no user
    (moto's own reset of every backend, ``POST /moto-api/reset``); its URL."""
    request = urllib.request.Request(f"{moto_server}/moto-api/reset", data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=60) as answer:
        assert answer.status == 200, f"moto's reset answered {answer.status}"
    return moto_server
