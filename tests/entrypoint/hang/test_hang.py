"""Hang detection on one host (issue 26), through the real shim with real processes: its switch
(``MALAUNCH_HANG_TIMEOUT``), the progress file every rank gets when it is on, a rank stopped, spinning or blocked
ended as ``hang`` and restarted, and silent scripts that show progress (or run with it off) left alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from shimutil import SCRIPTS, assert_nothing_left, free_port, marked_env, shim, write_v10_table

pytestmark = pytest.mark.process

JOB = str(SCRIPTS / "hang_job.py")


def one_host(tmp_path: Path, **extra: str) -> Dict[str, str]:
    base = {"MALAUNCH_LOG_DIR": str(tmp_path / "logs"), "MALAUNCH_GRACE_PERIOD": "3", "HANG_JOB_DIR": str(tmp_path),
            "MALAUNCH_RESTART_BACKOFF": "0.2"}  # fmt: skip
    return marked_env({**base, **extra})


def test_with_hang_detection_every_rank_gets_an_existing_progress_file(tmp_path: Path) -> None:
    env = one_host(tmp_path, MALAUNCH_HANG_TIMEOUT="30", HANG_PLAN="0:0=env")
    done = shim([JOB], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"progress file: {tmp_path / 'logs' / 'progress'} exists: True" in done.stdout
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])


@pytest.mark.parametrize("value", [None, "0"])
def test_without_it_no_progress_file_is_given(tmp_path: Path, value: str | None) -> None:
    extra = {"MALAUNCH_HANG_TIMEOUT": value} if value is not None else {}
    env = one_host(tmp_path, HANG_PLAN="0:0=env", **extra)
    done = shim([JOB], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "progress file: None exists: False" in done.stdout
    assert not (tmp_path / "logs" / "progress").exists()


@pytest.mark.parametrize("value", ["soon", "-1", "1e3", "86401"])
def test_a_bad_value_exits_2_with_one_line(tmp_path: Path, value: str) -> None:
    done = shim([JOB], one_host(tmp_path, MALAUNCH_HANG_TIMEOUT=value), tmp_path)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if "MALAUNCH_HANG_TIMEOUT" in line]
    assert len(errors) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "started-h0-a0").exists()


def report(tmp_path: Path) -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads((tmp_path / "logs" / "report.json").read_text())
    return data


@pytest.mark.parametrize("action", ["stop", "spin", "pipe"])
def test_a_hung_rank_ends_the_attempt_as_hang_and_the_restart_succeeds(tmp_path: Path, action: str) -> None:
    env = one_host(tmp_path, MALAUNCH_HANG_TIMEOUT="2", MA_MAX_RESTARTS="1", HANG_PLAN=f"0:0={action}")
    done = shim([JOB], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "started-h0-a1").exists()
    first, second = report(tmp_path)["attempts"]
    assert (first["exit_code"], first["failure_class"], first["restarted"]) == (124, "hang", True)
    assert "hung: no rank of this host wrote output" in first["root_cause"]["tail"][-1]
    assert (second["exit_code"], second["root_cause"]) == (0, None)
    assert "attempt 0 failed (hang): restart 1 of 1" in done.stderr
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])


def test_without_restarts_a_hang_exits_124_with_class_hang(tmp_path: Path) -> None:
    env = one_host(tmp_path, MALAUNCH_HANG_TIMEOUT="2", HANG_PLAN="0:0=sleep")
    done = shim([JOB], env, tmp_path)
    assert done.returncode == 124, done.stderr
    data = report(tmp_path)
    assert data["failure_class"]["class"] == "hang" and data["failure_class"]["retryable"] is True
    assert "failure class: hang (retryable)" in done.stderr
    assert "Traceback" not in done.stderr
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])


def test_a_script_that_touches_its_progress_file_is_left_alone(tmp_path: Path) -> None:
    env = one_host(tmp_path, MALAUNCH_HANG_TIMEOUT="2", HANG_PLAN="0:0=progress", HANG_SECONDS="6")
    done = shim([JOB], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "hung" not in done.stderr
    assert done.stdout.rstrip().endswith("done")


def test_a_script_that_keeps_printing_is_left_alone(tmp_path: Path) -> None:
    env = one_host(tmp_path, MALAUNCH_HANG_TIMEOUT="2", HANG_PLAN="0:0=chatty", HANG_SECONDS="6")
    done = shim([JOB], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "hung" not in done.stderr


def test_off_a_silent_script_is_left_alone(tmp_path: Path) -> None:
    env = one_host(tmp_path, HANG_PLAN="0:0=quiet", HANG_SECONDS="5")
    done = shim([JOB], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "hung" not in done.stderr


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("run", [1, 2, 3])
def test_waiting_ranks_whose_last_output_came_within_a_look_give_the_lowest_rank(
    tmp_path: Path, ranks: int, run: int
) -> None:
    """Every rank of the host enters a collective and waits (no rank stands out); rank 0 says so 0.7 s after the
    others: more than one look of the shim at their logs (every 0.5 s), less than two. Which came last is arrival
    timing, no fact about the hang, so the lowest rank is named, as between hosts. The old rule named the rank
    silent longest: a rank that merely spoke a look earlier (rank 1 here, on every run)."""
    del run
    write_v10_table(tmp_path / "table.json", servers=1, devices=ranks)
    env = one_host(tmp_path, MALAUNCH_HANG_TIMEOUT="2", HANG_PLAN="0:0=collective", HANG_PEERS=str(ranks),
                   HANG_LATE="0", HANG_DELAY="0.7", MA_RUN_METHOD="ranktable", MA_CURRENT_HOST_IP="127.0.0.1",
                   RANK_TABLE_FILE=str(tmp_path / "table.json"), MALAUNCH_MASTER_PORT=str(free_port()))  # fmt: skip
    done = shim([JOB], env, tmp_path)
    assert done.returncode == 124, done.stderr
    cause = report(tmp_path)["root_cause"]
    assert (cause["name"], cause["rank"]) == ("rank 0", 0), (cause, done.stderr)
    assert cause["why"].startswith("no rank stands out (none stopped, in disk wait or spinning: all wait); ranks "
                                   f"{', '.join(map(str, range(ranks)))} were silent equally long"), cause["why"]
    assert "hang root cause on this host: rank 0: no rank stands out" in done.stderr
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])
