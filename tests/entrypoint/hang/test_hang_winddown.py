"""Silence after the last rank has exited is no hang (issue 43): torchrun's agent may take longer than
``MALAUNCH_HANG_TIMEOUT`` to end after its workers succeeded (its exit barrier, its store closing), and the attempt
that printed ``done`` was then ended as hung. A rank that still runs and says nothing is hung as before.

Real processes: the supervisor with hang detection on, over a torchrun-like launcher (bin/fake_torchrun.py) whose
workers the watch finds as it finds torchrun's."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from malaunch.entrypoint.launchers.running import launcher_of
from malaunch.entrypoint.plan.launch_plan import ProcessSpec
from malaunch.entrypoint.run.supervisor import run_plan
from procutil import BIN, PY, assert_nothing_left, make_plan, new_mark

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]

TIMEOUT = 1.0  # seconds of silence that make a running rank hung


def _run(tmp_path: Path, *args: str) -> tuple:
    mark = new_mark()
    logs = tmp_path / "logs"
    spec = ProcessSpec(
        name="torchrun",
        argv=(PY, str(BIN / "fake_torchrun.py"), "--nproc", "2", f"--log_dir={logs / 'torchrun'}", *args),
        env={"MALAUNCH_TEST_MARK": mark},
        cwd=None,
        log_file=str(logs / "torchrun.log"),
    )
    rank_logs = {r: str(logs / f"rank-{r}.log") for r in range(2)}
    plan = make_plan(logs, [spec], log_source="attempt_files", rank_logs=rank_logs, grace=2.0)
    out, err = io.BytesIO(), io.BytesIO()
    result = run_plan(plan, dict(os.environ), launcher_of(plan), console_out=out, console_err=err,
                      hang_timeout=TIMEOUT)  # fmt: skip
    assert_nothing_left(mark)
    return result, out.getvalue().decode(), err.getvalue().decode()


def test_a_launcher_that_winds_down_after_its_ranks_exited_is_not_hung(tmp_path: Path) -> None:
    # the launcher stays 5 timeouts after its workers said "done" and exited 0, printing nothing
    result, out, err = _run(tmp_path, "--linger", str(5 * TIMEOUT), "--", "--say", "done")
    assert (result.exit_code, result.root_cause) == (0, None), err
    assert "hung" not in err and out.count("] done\n") == 2
    assert "all workers succeeded" in err


def test_a_silent_rank_that_still_runs_is_hung_under_the_same_launcher(tmp_path: Path) -> None:
    result, _, err = _run(tmp_path, "--", "--say", "started", "--sleep", "60")
    assert result.exit_code == 124, err
    assert "hung: no rank of this host wrote output" in err
