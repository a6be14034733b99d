"""The failure report: exit-code hints, the human block, the JSON report and its atomic, never-crashing write."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from malaunch.entrypoint.plan.launch_plan import LaunchPlan, ProcessSpec
from malaunch.entrypoint.report.report import (
    Failure,
    RunResult,
    describe_exit,
    describe_failure_exit,
    format_failure,
    report_json,
)
from malaunch.entrypoint.report.reportfile import write_report
from procutil import assert_nothing_left, make_plan, new_mark, run, worker_spec


def _plan(tmp_path: Path) -> LaunchPlan:
    spec = ProcessSpec(name="rank-3", argv=("python", "train.py"), env={}, cwd=None,
                       log_file=str(tmp_path / "rank-3.log"), rank=3, local_rank=1)
    return make_plan(tmp_path, [spec])


FAILURE = Failure(name="rank-3", rank=3, local_rank=1, host="node-2", pid=4242, exit_code=137, signal=9,
                  log_file="/logs/rank-3.log", tail=("step 10 loss 1.2", "allocating 80 GiB"))


@pytest.mark.parametrize(
    ("code", "sig", "expected"),
    [
        (137, 9, "killed by SIGKILL: likely out of memory (OOM killer) or killed from outside"),
        (137, None, "killed by SIGKILL: likely out of memory (OOM killer) or killed from outside"),
        (139, None, "killed by SIGSEGV: segmentation fault"),
        (134, 6, "killed by SIGABRT: aborted"),
        (143, None, "killed by SIGTERM: terminated"),
        (130, None, "killed by SIGINT: interrupted"),
        (1, None, "generic error"),
        (127, None, "command not found"),
        (42, None, "exited with code 42"),
        (128 + 40, None, "killed by signal 40"),
    ],
)
def test_describe_exit(code: int, sig: object, expected: str) -> None:
    assert describe_exit(code, sig).startswith(expected)  # type: ignore[arg-type]


def test_the_shims_own_refusal_is_not_called_a_scripts_usage_error() -> None:
    # a host that started no rank (it cannot hold the checkpoint the job resumes from): the root cause is the shim,
    # exit 2; a user's script that exits 2 keeps the usage-error hint
    line = "ma-entrypoint: error: host 1 (10.0.0.2) cannot resume from checkpoint /ckpt/step-3 (step 3) ..."
    refusal = Failure(name="ma-entrypoint", rank=None, local_rank=None, host="10.0.0.2", pid=None, exit_code=2,
                      signal=None, log_file="/logs/h1", tail=(line,))  # fmt: skip
    text = format_failure(RunResult(2, refusal, None, 1.0))
    assert "  exit code : 2 (the shim refused its input (its line below says what, and what to do))" in text
    assert "usage error" not in text and f"    | {line}" in text
    assert describe_failure_exit(refusal._replace(exit_code=3)).startswith("the shim could not go on")
    assert describe_failure_exit(FAILURE._replace(exit_code=2, signal=None)).startswith("usage error")


@pytest.mark.parametrize(("tail", "heading"), [(("only line",), "last 1 line of"), (("a", "b"), "last 2 lines of")])
def test_the_tail_heading_agrees_with_its_count(tail: tuple[str, ...], heading: str) -> None:
    text = format_failure(RunResult(137, FAILURE._replace(tail=tail), None, 1.0))
    assert f"  {heading} its output:" in text


def test_format_failure_names_everything_a_user_needs() -> None:
    text = format_failure(RunResult(137, FAILURE, None, 12.34))
    assert "rank 3 (local rank 1) on host node-2, pid 4242" in text
    assert "exit code : 137 (killed by SIGKILL: likely out of memory" in text
    assert "signal    : 9 (SIGKILL)" in text
    assert "log file  : /logs/rank-3.log" in text
    assert text.endswith("    | step 10 loss 1.2\n    | allocating 80 GiB")
    assert "12.3s" in text


def test_format_failure_for_a_process_without_rank_and_no_output() -> None:
    failure = Failure("torchrun", None, None, "h", None, 1, None, "/logs/torchrun.log", ())
    text = format_failure(RunResult(1, failure, None, 1.0))
    assert "process torchrun on host h" in text and "pid" not in text
    assert "generic error" in text and "(it wrote no output)" in text


def test_format_without_root_cause() -> None:
    assert "received SIGTERM" in format_failure(RunResult(143, None, 15, 3.0))
    assert "(exit code 143)" in format_failure(RunResult(143, None, 15, 3.0))
    assert "succeeded" in format_failure(RunResult(0, None, None, 3.0))


def test_report_json_is_json_and_complete(tmp_path: Path) -> None:
    data = report_json(RunResult(137, FAILURE, None, 12.3456), _plan(tmp_path))
    assert json.loads(json.dumps(data)) == data
    assert data["status"] == "failed" and data["exit_code"] == 137 and data["duration"] == 12.346
    cause = data["root_cause"]
    assert (cause["rank"], cause["local_rank"], cause["signal_name"], cause["tail"][-1]) == (
        3, 1, "SIGKILL", "allocating 80 GiB",
    )
    assert cause["hint"].startswith("killed by SIGKILL")
    assert data["rank_logs"] == {"3": str(tmp_path / "rank-3.log")}
    stopped = report_json(RunResult(130, None, 2, 1.0), _plan(tmp_path))
    assert (stopped["status"], stopped["shim_signal_name"], stopped["root_cause"]) == ("stopped", "SIGINT", None)
    assert report_json(RunResult(0, None, None, 1.0), _plan(tmp_path))["status"] == "succeeded"


def test_write_report_creates_parents_and_replaces_atomically(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "report.json"
    assert write_report(str(target), {"exit_code": 1}) is None
    assert write_report(str(target), {"exit_code": 2}) is None
    assert json.loads(target.read_text()) == {"exit_code": 2}
    assert sorted(os.listdir(target.parent)) == ["report.json"]  # no temporary file left behind
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_unwritable_report_path_returns_a_message(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    problem = write_report(str(blocker / "report.json"), {"exit_code": 1})
    assert problem is not None
    assert str(blocker / "report.json") in problem and "MALAUNCH_REPORT_FILE" in problem
    assert write_report("/proc/report.json", {}) is not None


@pytest.mark.process
@pytest.mark.timeout(60)
def test_report_of_a_real_failed_run(tmp_path: Path) -> None:
    mark = new_mark()
    specs = [worker_spec(r, tmp_path, "--fail-rank", "0", "--exit-code", "9", "--say", "boom", "--sleep", "60",
                         mark=mark) for r in range(2)]
    plan = make_plan(tmp_path, specs)
    result, _, _ = run(plan)
    assert write_report(plan.report_file, report_json(result, plan)) is None
    data = json.loads(Path(plan.report_file).read_text())
    assert (data["exit_code"], data["root_cause"]["rank"], data["root_cause"]["tail"]) == (9, 0, ["boom"])
    assert_nothing_left(mark)
