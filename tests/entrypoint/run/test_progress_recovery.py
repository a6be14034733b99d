"""Progress without a checkpoint folder and the time to recover, through the real shim with real processes (issue
39): ``checkpoint.progress()`` records each rank's step in ``MALAUNCH_PROGRESS_DIR`` for every job, a script that
prints nothing but reports progress is not hung, and a rank killed leaves a recovery record whose four times
(failure seen, last rank gone, next attempt started, its first progress) are in order, in ``report.json`` and in
``recovery.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from malaunch.entrypoint.run.progress import read_progress
from malaunch.entrypoint.run.recovery import read_recovery
from shimutil import SCRIPTS, assert_nothing_left, free_port, marked_env, shim, write_v10_table

pytestmark = pytest.mark.process

STEPS = str(SCRIPTS / "progress_steps.py")
TIMES = ("failure_seen", "last_rank_gone", "next_started", "first_progress")


def fan_out(tmp_path: Path, **extra: str) -> Dict[str, str]:
    write_v10_table(tmp_path / "table.json", servers=1, devices=2)
    base = {"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_GRACE_PERIOD": "3",
            "MALAUNCH_LOG_DIR": str(tmp_path / "logs"), "MALAUNCH_RESTART_BACKOFF": "0.2", "STEP_PACE": "0.02"}
    return marked_env({**base, **extra})  # fmt: skip


def report(tmp_path: Path) -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads((tmp_path / "logs" / "report.json").read_text())
    return data


def test_progress_is_recorded_for_every_rank_without_a_checkpoint_folder(tmp_path: Path) -> None:
    env = fan_out(tmp_path)
    done = shim([STEPS, "5", "5"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    records = read_progress(str(tmp_path / "logs" / "progress.d"))
    assert [(r.rank, r.step, r.total, r.attempt) for r in records] == [(0, 5, 5, "0.0"), (1, 5, 5, "0.0")]
    assert all(r.first <= r.since_time <= r.time and r.since_step == 1 for r in records)
    assert "recovery" not in report(tmp_path)  # nothing failed: no record
    assert not (tmp_path / "logs" / "recovery.json").exists()
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])


def test_a_rank_killed_leaves_a_recovery_record_with_four_times_in_order(tmp_path: Path) -> None:
    env = fan_out(tmp_path, MA_MAX_RESTARTS="1", FAIL_RANK="1", FAIL_STEP="3")
    done = shim([STEPS, "6", "6"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    data = report(tmp_path)
    (record,) = data["recovery"]
    assert (record["attempt"], record["next_attempt"], record["ended"]) == (0, 1, False)
    times = [record[name] for name in TIMES]
    assert all(isinstance(value, float) for value in times), record
    assert times == sorted(times), record
    assert record["first_progress_after"] == pytest.approx(times[3] - times[0], abs=0.002)
    first = min(r.first for r in read_progress(str(tmp_path / "logs" / "progress.d")) if r.attempt == "1.0")
    assert record["first_progress"] == pytest.approx(first, abs=0.002)
    assert "attempt 0 failure seen: " in record["line"] and "attempt 1 first progress: " in record["line"]
    assert "None" not in record["line"]
    assert [item.to_json() for item in read_recovery(str(tmp_path / "logs" / "recovery.json"))] == [record]
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])


def test_a_failure_that_ends_the_job_says_no_attempt_followed(tmp_path: Path) -> None:
    env = fan_out(tmp_path, MA_MAX_RESTARTS="1", FAIL_RANK="0", FAIL_STEP="2", FAIL_ATTEMPTS="0,1")
    done = shim([STEPS, "6"], env, tmp_path)
    assert done.returncode == 137, done.stderr
    first, second = report(tmp_path)["recovery"]
    assert first["next_started"] is not None and first["first_progress"] is not None and not first["ended"]
    assert second["ended"] and (second["next_started"], second["first_progress"]) == (None, None)
    assert second["failure_seen"] <= second["last_rank_gone"]
    assert "attempt 2 started: never: the job ended without another attempt" in second["line"]
    assert "None" not in second["line"]
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])


@pytest.mark.torch
@pytest.mark.slow
def test_torchruns_own_restart_gets_a_recovery_record_of_its_own(tmp_path: Path) -> None:
    """torchrun restarts its workers itself (``--max_restarts`` in MA_EXTRA_TORCHRUN_PARAMS): one shim attempt, and
    the restart inside it is recorded like the shim's own, from what the shim sees: the workers of torchrun's
    attempt 0 failing and gone, those of its attempt 1 started, and their progress records ("0.1")."""
    env = marked_env({"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2", "MA_MAX_RESTARTS": "1",
                      "MA_EXTRA_TORCHRUN_PARAMS": "--max_restarts=1", "MA_TORCHRUN_MASTER_PORT": str(free_port()),
                      "MALAUNCH_LOG_DIR": str(tmp_path / "logs"), "MALAUNCH_GRACE_PERIOD": "3", "STEP_PACE": "0.05",
                      "FAIL_RANK": "1", "FAIL_STEP": "3", "FAIL_COUNTER": "TORCHELASTIC_RESTART_COUNT"})  # fmt: skip
    done = shim([STEPS, "8", "8"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    data = report(tmp_path)
    assert [(a["attempt"], a["restarted"]) for a in data["attempts"]] == [(0, True), (1, False)], data["attempts"]
    (record,) = data["recovery"]  # the shim's attempt 0 succeeded: torchrun's restart is the only record
    assert (record["attempt"], record["launcher_attempt"], record["next_attempt"], record["ended"]) == (0, 0, 0, False)
    times = [record[name] for name in TIMES]
    assert all(isinstance(value, float) for value in times) and times == sorted(times), record
    progress = read_progress(str(tmp_path / "logs" / "progress.d"))
    assert sorted(r.attempt for r in progress) == ["0.1", "0.1"]  # the progress records carry torchrun's count
    assert record["first_progress"] == pytest.approx(max(min(r.first for r in progress), times[2]), abs=0.002)
    assert record["line"].startswith("attempt 0.0 failure seen: ") and "attempt 0.1 started: " in record["line"]
    assert "attempt 0.1 first progress: " in record["line"] and "not yet" not in record["line"]
    assert [item.to_json() for item in read_recovery(str(tmp_path / "logs" / "recovery.json"))] == [record]
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])


@pytest.mark.parametrize(("until", "hung"), [("40", False), ("3", True)])
def test_a_silent_script_that_calls_progress_is_not_hung(tmp_path: Path, until: str, hung: bool) -> None:
    """It prints nothing for 6 s, hang timeout 1 s: progress() alone keeps it alive; the same script that stops
    calling it after step 3 is hung (the check can fail)."""
    env = fan_out(tmp_path, MALAUNCH_HANG_TIMEOUT="1", STEP_PACE="0.15", PROGRESS_UNTIL=until)
    done = shim([STEPS, "40", "40"], env, tmp_path)
    assert done.returncode == (124 if hung else 0), done.stderr
    assert ("ma-entrypoint: hung: " in done.stderr) is hung
    if not hung:
        steps = [r.step for r in read_progress(str(tmp_path / "logs" / "progress.d"))]
        assert steps == [40, 40]
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])
