"""The I/O before planning: waiting for the master's name, locating Python for msrun, the boot file check."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List

import pytest
from malaunch.entrypoint.contract.config import parse_shim_config
from malaunch.entrypoint.contract.errors import ConfigError, WaitTimeout
from malaunch.entrypoint.launchers.planning import gather_inputs
from malaunch.entrypoint.plan.prepare import python_dir_for, wait_for_address
from malaunch.entrypoint.plan.resolve import resolve_ipv4


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: List[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_master_that_resolves_late_is_waited_for() -> None:
    clock = FakeClock()
    answers = iter([OSError("no such host"), OSError("no such host"), "10.0.0.9"])

    def resolve(name: str) -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert (
        wait_for_address("job-worker-0.job", 60, resolve=resolve, clock=clock, sleep=clock.sleep)
        == "10.0.0.9"
    )
    assert len(clock.sleeps) == 2 and clock.sleeps[1] > clock.sleeps[0]  # backs off


def test_master_that_never_resolves_times_out_with_a_hint() -> None:
    clock = FakeClock()
    progress: List[str] = []

    def resolve(name: str) -> str:
        raise OSError("Name or service not known")

    with pytest.raises(WaitTimeout) as info:
        wait_for_address(
            "w0.job", 30, resolve=resolve, clock=clock, sleep=clock.sleep, progress=progress.append
        )
    message = str(info.value)
    assert (
        "'w0.job'" in message and "MALAUNCH_MASTER_WAIT" in message and "Name or service not known" in message
    )
    assert progress, "a long wait must report progress"


def test_real_unresolvable_master_fails_with_exit_3_message(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    env = {
        "MA_RUN_METHOD": "msrun",
        "VC_WORKER_HOSTS": "master.malaunch-test.invalid",
        "MALAUNCH_MASTER_WAIT": "1",
    }
    with pytest.raises(WaitTimeout, match=r"master\.malaunch-test\.invalid"):
        gather_inputs(parse_shim_config(env), "train.py", [], cwd=str(tmp_path), resolve=resolve_ipv4)


def test_python_dir_is_the_interpreters_own_directory_in_a_venv(tmp_path: Path) -> None:
    directory, needs_link = python_dir_for(sys.executable, str(tmp_path))
    assert os.path.samefile(os.path.join(directory, "python"), sys.executable)
    assert needs_link is (directory == str(tmp_path))


def test_python_dir_falls_back_to_a_private_link(tmp_path: Path) -> None:
    odd = tmp_path / "bin" / "python3.99"
    odd.parent.mkdir()
    odd.symlink_to(sys.executable)
    assert python_dir_for(str(odd), str(tmp_path / "link")) == (str(tmp_path / "link"), True)


def test_msrun_dry_run_asks_no_name_server(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    env = {"MA_RUN_METHOD": "msrun", "VC_WORKER_HOSTS": "w0.job"}

    def resolve(name: str) -> str:
        raise AssertionError("dry run must not resolve names")

    got = gather_inputs(
        parse_shim_config(env), "train.py", [], cwd=str(tmp_path), resolve=resolve, dry_run=True
    )
    assert got.master_ip == "w0.job"
    assert any("resolves 'w0.job'" in note for note in got.notes)


def test_boot_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"BOOT_FILE='missing\.py'"):
        gather_inputs(parse_shim_config({}), "missing.py", [], cwd=str(tmp_path))


def test_a_boot_file_that_is_a_directory_is_called_one(tmp_path: Path) -> None:
    """A folder given as the boot file exists: the line says what it is, not that there is no such file."""
    (tmp_path / "code").mkdir()
    with pytest.raises(ConfigError) as caught:
        gather_inputs(parse_shim_config({}), "code", [], cwd=str(tmp_path))
    assert "BOOT_FILE='code'" in str(caught.value)
    assert "a directory" in str(caught.value) and "no such file" not in str(caught.value)
