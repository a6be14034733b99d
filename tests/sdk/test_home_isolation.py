"""No test touches the user's real home: the root conftest points HOME, MALAUNCH_HOME and KUBECONFIG into a
temporary folder for the whole session, drops cloud credentials, and fails the session when the real
``~/.malaunch`` changed. These tests pin that isolation and the check itself."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

from homeguard import changes, snapshot
from malaunch.sdk.backends.job_index import JobIndex
from malaunch.sdk.backends.local import LocalBackend

REAL_HOME = pwd.getpwuid(os.getuid()).pw_dir


def test_the_session_runs_in_a_temporary_home() -> None:
    assert os.environ["HOME"] != REAL_HOME
    assert not os.environ["MALAUNCH_HOME"].startswith(os.path.join(REAL_HOME, ".malaunch"))
    assert not os.environ["KUBECONFIG"].startswith(os.path.join(REAL_HOME, ".kube"))
    assert not [key for key in os.environ if key.startswith(("HUAWEICLOUD_", "AWS_"))]
    assert os.environ["XDG_CONFIG_HOME"].startswith(os.environ["HOME"])  # the profiles, never ~/.config's
    assert "MALAUNCH_PROFILE" not in os.environ


def test_defaults_that_expand_the_home_land_in_the_sandbox() -> None:
    # a backend given an empty environment (as the Volcano tests do) falls back to ~/.malaunch
    for path in (JobIndex.default({}).path, LocalBackend(environ={}).home):
        assert not path.startswith(os.path.join(REAL_HOME, ".malaunch")), path
        assert path.startswith(os.environ["HOME"]), path


def test_subprocesses_inherit_the_sandbox() -> None:
    code = "import os; print(os.path.expanduser('~'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == os.environ["HOME"] != REAL_HOME


def test_the_check_sees_a_file_added_written_or_removed(tmp_path: Path) -> None:
    folder = tmp_path / "fake-home" / ".malaunch"
    folder.mkdir(parents=True)
    (folder / "job-index.json").write_text("{}")
    before = snapshot(str(folder))
    assert changes(before, snapshot(str(folder))) == {}
    (folder / "job-index.json").write_text('{"jobs": {}}')
    (folder / "jobs").mkdir()
    (folder / "jobs" / "state.json").write_text("{}")
    assert changes(before, snapshot(str(folder))) == {
        str(folder / "job-index.json"): "written",
        str(folder / "jobs" / "state.json"): "added",
    }
    assert changes(snapshot(str(folder)), {}) == {
        str(folder / "job-index.json"): "removed",
        str(folder / "jobs" / "state.json"): "removed",
    }
