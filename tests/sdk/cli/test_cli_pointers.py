"""Messages that point the right way (issue 43, item 8): each names the field, option or path at fault and the fix
that applies to where the value came from. Real ``ma-submit`` processes."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import pytest
from malaunch.sdk import ConfigError
from malaunch.sdk.backends.local.backend import LocalBackend
from sdkutil import ma_submit, write_job


def _error(args: List[str], env: Dict[str, str], code: int = 2) -> str:
    done = ma_submit(args, env)
    assert done.returncode == code, (args, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("field", "wanted"),
    [("gpus", "resources.devices_per_host"), ("nodes", "resources.hosts"), ("max_restart", "launcher.max_restarts")],
)
def test_a_section_field_written_at_the_top_points_into_its_section(
    field: str, wanted: str, tmp_path: Path, cli_env: Dict[str, str]
) -> None:
    job = write_job(tmp_path, "print(1)\n", **{field: 4})
    line = _error(["--dry-run", str(job)], cli_env)
    assert f"{field}: unknown field" in line and line.endswith(f"did you mean {wanted}?"), line


def test_env_naming_a_variable_a_field_sets_says_which_field(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    job = str(write_job(tmp_path, "print(1)\n"))
    line = _error(["--dry-run", "--env", "MA_NUM_HOSTS=3", job], cli_env)
    assert line == ("ma-submit: error: --env MA_NUM_HOSTS: is set by the backend from resources.hosts, not by env, "
                    "got '3'; set resources.hosts instead (or give --hosts)")  # fmt: skip
    line = _error(["--dry-run", "--env", "MA_MAX_RESTARTS=3", job], cli_env)
    assert line.endswith("from launcher.max_restarts, not by env, got '3'; set launcher.max_restarts instead"), line
    line = _error(["--dry-run", "--env", "VC_TASK_INDEX=3", job], cli_env)  # the backend's own: nothing sets it
    assert line.endswith("is set by the backend, not by env, got '3'; remove it"), line
    line = _error(["--dry-run", "--env", "MA_RUN_METHOD=x", job], cli_env)  # a value refused: another value
    assert line.endswith("give another --env MA_RUN_METHOD"), line


def test_a_param_option_without_a_name_says_so(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    job = str(write_job(tmp_path, "print(1)\n"))
    line = _error(["sweep", job, "--param", "=1,2", "--dry-run"], cli_env)
    assert line == "ma-submit: error: --param: has an empty parameter name before '=', got '=1,2'; name it: " \
        "--param lr=1,2", line  # fmt: skip
    line = _error(["sweep", job, "--param", "2x=1,2", "--dry-run"], cli_env)
    assert "names '2x', not a parameter name" in line and "sweep section" not in line, line


@pytest.mark.parametrize("under", [True, False], ids=["under-a-file", "a-file"])
def test_a_home_that_is_a_file_or_under_one_is_an_error_not_an_empty_list(
    under: bool, tmp_path: Path, cli_env: Dict[str, str]
) -> None:
    (tmp_path / "afile").write_text("")
    home = tmp_path / "afile" / "home" if under else tmp_path / "afile"
    env = {**cli_env, "MALAUNCH_HOME": str(home)}
    where = f"is under the file {tmp_path / 'afile'}" if under else "is a file"
    for args in (["list"], ["list", "--output", "json"], ["prune", "--older-than", "1d"]):
        done = ma_submit(args, env)
        assert done.returncode == 2, (args, done.stderr)
        assert f"the jobs' home {where}, not a folder" in done.stderr and "MALAUNCH_HOME" in done.stderr, done.stderr
        assert "rebuilt" not in done.stderr, done.stderr
    with pytest.raises(ConfigError, match="not a folder"):
        LocalBackend(home=str(home)).list()
    assert not (tmp_path / "nothing").exists()
    assert LocalBackend(home=str(tmp_path / "nothing" / "yet")).list() == []  # a home not made yet holds no jobs
