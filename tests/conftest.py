"""Every test runs away from the user's real home, for the whole session.

Before any test module is imported, ``HOME``, ``MALAUNCH_HOME``, ``XDG_CONFIG_HOME`` (the profiles) and
``KUBECONFIG`` point into one temporary folder, and the cloud credentials and profile of the environment
(``HUAWEICLOUD_*``, ``AWS_*``, ``MALAUNCH_MODELARTS_*``, ``MALAUNCH_OBS_*``, ``MALAUNCH_PROFILE``) are dropped,
so nothing a test starts (the SDK in this process, ``ma-submit`` subprocesses, the local job runner) can find
the real ``~/.malaunch``, profiles, kubeconfig or credentials. Tests that
need credentials or a kubeconfig give their own, pointing at the loopback fakes.

Every process the suite starts takes SIGINT as a terminal's Ctrl-C, however the suite itself was started: a
suite run in the background of a shell without job control (``.ci/run &`` in a script, ``nohup``) inherits SIGINT
ignored, which every process it starts would keep (an ignored signal stays ignored through exec, and Python then
installs no KeyboardInterrupt), so the tests that press Ctrl-C on a follower would wait for an answer that never
comes. The default is put back for this process, and so for everything it starts.

At the end of the session the real ``~/.malaunch``, ``~/.config/malaunch``, ``~/.kube`` and ``~/.huaweicloud``
(found through the password database, not ``$HOME``) are compared with how they were at the start: a file
written, added or removed there fails the session (``huaweicloudsdkcore``, for one, writes
``~/.huaweicloud/application_id`` when first used).

Run in parallel (pytest-xdist, ``-n``), every worker process imports this file too, so each worker has a
sandbox of its own. The comparison is made once, by the controlling process: it took its snapshot before any
worker started and compares after the last one ended (xdist drops the exit status a worker's session sets).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Callable, Iterator, List, MutableMapping

import pytest
from homeguard import changes, snapshot

_DROPPED = ("HUAWEICLOUD_", "AWS_", "MALAUNCH_MODELARTS_", "MALAUNCH_OBS_", "KUBERNETES_SERVICE_", "MALAUNCH_PROFILE")
REAL_HOME = pwd.getpwuid(os.getuid()).pw_dir
REAL_MALAUNCH = os.path.join(REAL_HOME, ".malaunch")
_GUARDED_NAMES = (".malaunch", os.path.join(".config", "malaunch"), ".kube", ".huaweicloud")
GUARDED = tuple(os.path.join(REAL_HOME, name) for name in _GUARDED_NAMES)
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
    environ["XDG_CONFIG_HOME"] = os.path.join(home, ".config")
    environ.setdefault("MALAUNCH_LOCAL_CAPACITY", "256")  # the local queue never holds a test's job back unless asked


_isolate(os.environ, _SANDBOX)
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:  # started in the background: Ctrl-C back to its default
    signal.signal(signal.SIGINT, signal.default_int_handler)
_BEFORE = {folder: snapshot(folder) for folder in GUARDED}


#: A test with one of these marks or fixtures starts real processes or servers (a shim, torchrun, msrun, a local
#: job, ``ma-submit``, emulated hosts, moto's S3 server, the fake ModelArts and Kubernetes APIs): it is ``slow``.
_SLOW_MARKS = ("process", "torch", "mindspore", "netns")
_SLOW_FIXTURES = frozenset({"cleanup_jobs", "cli_env", "hosts", "moto_s3", "fake_ma", "kube", "ma_env", "s3"})


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects
def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    """Mark ``slow`` every test that starts real processes or servers (``_SLOW_MARKS``, ``_SLOW_FIXTURES``); the
    other tests of seconds are marked ``slow`` where they are. ``-m "not slow"`` runs the rest. Then put the
    longest first (:func:`longest_first`)."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if any(item.get_closest_marker(name) for name in _SLOW_MARKS) or _SLOW_FIXTURES & fixtures:
            item.add_marker(pytest.mark.slow)
    items[:] = longest_first(items, _suite_timeout(config))


def _suite_timeout(config: pytest.Config) -> float:
    """pyproject's ``timeout`` (pytest-timeout's), or 0 when that plugin is not loaded (``-p no:timeout``)."""
    try:
        return float(config.getini("timeout") or 0)
    except ValueError:  # the ini key is pytest-timeout's: unknown without it
        return 0.0


def longest_first(items: List[pytest.Item], suite_timeout: float) -> List[pytest.Item]:
    """The tests in the order that ends a parallel run soonest: the longest first, so that none of them starts
    when the others are nearly done, and the quick ones last, to fill the gaps. The longest are those that ask for
    more than the suite's timeout (``@pytest.mark.timeout(N)`` above pyproject's 300 s: several real jobs in a
    row), largest first; then every other ``slow`` test; then the rest. Within each, the collection's order (a
    stable sort): the same on every xdist worker, as xdist requires."""

    def rank(item: pytest.Item) -> tuple[int, float]:
        marker = item.get_closest_marker("timeout")
        declared = float(marker.args[0]) if marker is not None and marker.args else 0.0
        if declared > suite_timeout:
            return (0, -declared)
        return (1, 0.0) if item.get_closest_marker("slow") else (2, 0.0)

    return sorted(items, key=rank)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session when the real ``~/.malaunch``, ``~/.kube`` or ``~/.huaweicloud`` changed; remove the
    sandbox. An xdist worker only removes its sandbox: the controlling process compares, once every worker ended."""
    if hasattr(session.config, "workerinput"):  # an xdist worker
        shutil.rmtree(_SANDBOX, ignore_errors=True)
        return
    touched = {path: what for folder in GUARDED for path, what in changes(_BEFORE[folder], snapshot(folder)).items()}
    shutil.rmtree(_SANDBOX, ignore_errors=True)
    if touched:
        shown = ", ".join(f"{path} ({what})" for path, what in sorted(touched.items())[:10])
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"ERROR: tests touched the real home {REAL_HOME}: {shown}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A scratch folder of a short path (``/tmp/ma-test-XXXXXXXX``), removed after the test, for a test that looks
    for a whole path in a message: messages cut a value past 80 characters, and ``tmp_path`` grows with the test's
    name, pytest's run number and, in a parallel run, the worker's folder (``popen-gw3/``)."""
    path = Path(tempfile.mkdtemp(prefix="ma-test-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def tmpfs() -> Iterator[Callable[[Path, str], Path]]:
    """``tmpfs(path, size)`` mounts a tmpfs of ``size`` (``"2m"``) at ``path`` (a disk that fills up) and returns
    ``path``. Everything mounted is unmounted when the test ends, however it ends (a failed assertion before the
    test's own clean-up, an error in the fixture chain), so no mount is left for pytest's ``rm_rf`` to trip on."""
    mounted: List[Path] = []

    def mount(path: Path, size: str) -> Path:
        if os.geteuid() != 0:
            pytest.skip("a full disk is emulated with a small tmpfs, which needs root; run the tests as root")
        path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()}); the disk-full test needs one")
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)  # busy (a process still in it): detach
        assert not os.path.ismount(path), f"{path} is still mounted after the test"
