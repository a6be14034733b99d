"""The SDK's one home for file locks (``malaunch.sdk.home.file_lock``): exclusive or shared, waiting or not,
held across processes as ``flock`` holds them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest
from malaunch.sdk.home import file_lock

ROOT = Path(__file__).resolve().parents[3]
Hold = Callable[[str], "subprocess.Popen[str]"]  # start a process holding the lock (exclusive or shared)
_HOLDER = (
    "import sys,time\n"
    "from malaunch.sdk.home import file_lock\n"
    "with file_lock(sys.argv[1], shared=sys.argv[2] == 'shared'):\n"
    "    print('held', flush=True)\n"
    "    sys.stdin.read()\n"
)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Hold]:
    started: list[subprocess.Popen[str]] = []

    def hold(kind: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path / "lock"), kind], text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        return proc

    yield hold
    for proc in started:
        proc.communicate(timeout=30)  # closing stdin lets it go


def test_a_lock_held_by_another_process_is_not_taken_without_waiting(tmp_path: Path, holder: Hold) -> None:
    proc = holder("exclusive")
    with file_lock(str(tmp_path / "lock"), wait=False) as held:
        assert held is False
    with file_lock(str(tmp_path / "lock"), shared=True, wait=False) as held:
        assert held is False
    proc.communicate(timeout=30)
    with file_lock(str(tmp_path / "lock"), wait=False) as held:
        assert held is True


def test_shared_holders_share_and_keep_an_exclusive_one_out(tmp_path: Path, holder: Hold) -> None:
    holder("shared")
    with file_lock(str(tmp_path / "lock"), shared=True, wait=False) as held:
        assert held is True
    with file_lock(str(tmp_path / "lock"), wait=False) as held:
        assert held is False


def test_only_the_home_module_takes_file_locks() -> None:
    takers = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "sdk").rglob("*.py")
                    if "fcntl.flock(" in path.read_text())  # fmt: skip
    assert takers == ["sdk/home.py"]
