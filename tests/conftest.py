"""Every test runs away from the user's real home, for the whole session.

Before any test module is imported, ``HOME``, ``MALAUNCH_HOME`` and ``KUBECONFIG`` point into one temporary
folder, and the cloud credentials of the environment (``HUAWEICLOUD_*``, ``AWS_*``, ``MALAUNCH_MODELARTS_*``,
``MALAUNCH_OBS_*``) are dropped, so nothing a test starts (the SDK in this process, ``ma-submit``
subprocesses, the local job runner) can find the real ``~/.malaunch``, kubeconfig or credentials. Tests that
need credentials or a kubeconfig give their own, pointing at the loopback fakes.

At the end of the session the real ``~/.malaunch``, ``~/.kube`` and ``~/.huaweicloud`` (found through the password
database, not ``$HOME``) are compared with how they were at the start: a file written, added or removed there
fails the session (``huaweicloudsdkcore``, for one, writes ``~/.huaweicloud/application_id`` when first used).
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from typing import MutableMapping

import pytest
from homeguard import changes, snapshot

_DROPPED = ("HUAWEICLOUD_", "AWS_", "MALAUNCH_MODELARTS_", "MALAUNCH_OBS_", "KUBERNETES_SERVICE_")
REAL_HOME = pwd.getpwuid(os.getuid()).pw_dir
REAL_MALAUNCH = os.path.join(REAL_HOME, ".malaunch")
GUARDED = tuple(os.path.join(REAL_HOME, name) for name in (".malaunch", ".kube", ".huaweicloud"))
_SANDBOX = tempfile.mkdtemp(prefix="malaunch-test-home-")


def _isolate(environ: MutableMapping[str, str], sandbox: str) -> None:
    """Point the home, malaunch's home and the kubeconfig into ``sandbox``; drop cloud credentials."""
    for key in [key for key in environ if key.startswith(_DROPPED)]:
        del environ[key]
    home = os.path.join(sandbox, "home")
    os.makedirs(home, exist_ok=True)
    environ["HOME"] = home
    environ["MALAUNCH_HOME"] = os.path.join(home, ".malaunch")
    environ["KUBECONFIG"] = os.path.join(home, ".kube", "no-config")


_isolate(os.environ, _SANDBOX)
_BEFORE = {folder: snapshot(folder) for folder in GUARDED}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session when the real ``~/.malaunch``, ``~/.kube`` or ``~/.huaweicloud`` changed; remove the
    sandbox."""
    touched = {path: what for folder in GUARDED for path, what in changes(_BEFORE[folder], snapshot(folder)).items()}
    shutil.rmtree(_SANDBOX, ignore_errors=True)
    if touched:
        shown = ", ".join(f"{path} ({what})" for path, what in sorted(touched.items())[:10])
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"ERROR: tests touched the real home {REAL_HOME}: {shown}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
