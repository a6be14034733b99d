"""No test touches the user's real home: the root conftest points HOME, MALAUNCH_HOME and KUBECONFIG into a
temporary folder for the whole session, drops cloud credentials, and fails the session when the real
``~/.malaunch`` changed. These tests pin that isolation and the check itself."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from homeguard import changes, snapshot
from malaunch.sdk.backends.job_index import JobIndex
from malaunch.sdk.backends.local.backend import LocalBackend

REAL_HOME = pwd.getpwuid(os.getuid()).pw_dir
TESTS = Path(__file__).resolve().parents[2]


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


FAKE_PASSWD = """
import os
import pwd

_real = pwd.getpwuid


def _with_fake_home(uid):  # the password database says the home is FAKE_HOME: the real home is never written
    entry = _real(uid)
    return pwd.struct_passwd((*entry[:5], os.environ["FAKE_HOME"], entry[6]))


pwd.getpwuid = _with_fake_home
"""

WRITES_THE_HOME = """
import os


def test_writes_the_home():
    folder = os.path.join(os.environ["FAKE_HOME"], ".malaunch")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "job-index.json"), "w") as fh:
        fh.write("{}")


def test_writes_nothing():
    pass
"""


@pytest.mark.slow  # a pytest session each
@pytest.mark.parametrize("parallel", [[], ["-n", "2"]], ids=["serial", "xdist"])
@pytest.mark.parametrize("selected", ["writes_the_home", "writes_nothing"])
def test_a_session_fails_when_a_test_touched_the_home_serial_or_parallel(
    tmp_path: Path, parallel: List[str], selected: str
) -> None:
    # the suite's own conftest, in a session whose password database names a scratch folder as the home
    tests = tmp_path / "tests"
    tests.mkdir()
    for name in ("conftest.py", "sdk/homeguard.py"):
        shutil.copy(TESTS / name, tests)
    (tests / "test_probe.py").write_text(WRITES_THE_HOME)
    (tmp_path / "fakepasswd.py").write_text(FAKE_PASSWD)
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "FAKE_HOME": str(home), "PYTHONPATH": os.pathsep.join([str(tmp_path), str(tests)])}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "fakepasswd", *parallel,
            "-k", selected, "tests"]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    touched = f"ERROR: tests touched the real home {home}: {home}/.malaunch/job-index.json (added)"
    if selected == "writes_the_home":
        assert done.returncode == 1 and touched in done.stdout, done.stdout + done.stderr
    else:
        assert done.returncode == 0 and "touched" not in done.stdout, done.stdout + done.stderr
