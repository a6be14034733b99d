"""Faults: ranks killed by signals, ranks that ignore SIGTERM, grandchildren, and signals to the shim itself.

Signals to the shim are sent to a real process (bin/driver.py runs run_plan as the shim would); SIGKILL to
that process leaves the cleanup to the watchdog.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from malaunch.entrypoint.plan.launch_plan import LaunchPlan
from malaunch.entrypoint.report.report import format_failure
from procutil import (
    BIN,
    PY,
    alive,
    assert_nothing_left,
    make_plan,
    new_mark,
    read_info,
    run,
    wait_until,
    worker_spec,
)

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]


def test_rank_killed_by_sigkill_is_137_with_oom_hint(tmp_path: Path) -> None:
    mark = new_mark()
    args = ["--fail-rank", "2", "--kill-self", "9", "--delay", "0.5", "--sleep", "60", "--say", "allocating"]
    specs = [worker_spec(r, tmp_path, *args, "--info-dir", str(tmp_path), mark=mark) for r in range(3)]
    result, _, _ = run(make_plan(tmp_path, specs))
    cause = result.root_cause
    assert result.exit_code == 137 and cause is not None
    assert (cause.rank, cause.signal, cause.exit_code) == (2, 9, 137)
    text = format_failure(result)
    assert "killed by SIGKILL: likely out of memory (OOM killer) or killed from outside" in text
    assert "| allocating" in text
    assert_nothing_left(mark, [read_info(tmp_path, r)["pid"] for r in range(3)])


@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGSEGV, 139, "SIGSEGV"), (signal.SIGABRT, 134, "SIGABRT")])
def test_rank_killed_by_native_crash(tmp_path: Path, sig: int, code: int, word: str) -> None:
    mark = new_mark()
    args = ["--fail-rank", "0", "--kill-self", str(int(sig)), "--delay", "0.3", "--sleep", "60"]
    specs = [worker_spec(r, tmp_path, *args, mark=mark) for r in range(2)]
    result, _, _ = run(make_plan(tmp_path, specs))
    assert result.root_cause is not None
    assert (result.exit_code, result.root_cause.signal, result.root_cause.rank) == (code, int(sig), 0)
    assert f"killed by {word}" in format_failure(result)
    assert_nothing_left(mark)


def test_sibling_ignoring_sigterm_is_killed_after_grace(tmp_path: Path) -> None:
    mark = new_mark()
    args = ["--fail-rank", "1", "--exit-code", "4", "--delay", "0.5", "--sleep", "60", "--ignore-term",
            "--info-dir", str(tmp_path)]
    specs = [worker_spec(r, tmp_path, *args, mark=mark) for r in range(2)]
    result, _, _ = run(make_plan(tmp_path, specs, grace=1.0))
    assert result.exit_code == 4 and result.root_cause is not None and result.root_cause.rank == 1
    assert "rank 0 ignoring SIGTERM" in (tmp_path / "rank-0.log").read_text()  # SIGTERM first, then SIGKILL
    assert_nothing_left(mark, [read_info(tmp_path, r)["pid"] for r in range(2)])


@pytest.mark.parametrize("setsid", [False, True], ids=["same-session", "own-session"])
def test_grandchildren_die_with_the_job(tmp_path: Path, setsid: bool) -> None:
    mark = new_mark()
    args = ["--fail-rank", "0", "--exit-code", "2", "--delay", "0.8", "--sleep", "60", "--spawn-grandchild",
            "--ignore-term", "--info-dir", str(tmp_path)] + (["--grandchild-setsid"] if setsid else [])
    specs = [worker_spec(r, tmp_path, *args, mark=mark) for r in range(2)]
    result, _, _ = run(make_plan(tmp_path, specs, grace=1.0))
    assert result.exit_code == 2
    infos = [read_info(tmp_path, r) for r in range(2)]
    grandchildren = [pid for info in infos for pid in info["grandchildren"]]
    assert len(grandchildren) == 2
    assert_nothing_left(mark, grandchildren + [info["pid"] for info in infos])


def test_leftover_grandchild_of_a_successful_job_is_swept(tmp_path: Path) -> None:
    mark = new_mark()
    spec = worker_spec(0, tmp_path, "--spawn-grandchild", "--grandchild-setsid", "--info-dir", str(tmp_path),
                       mark=mark)
    result, _, _ = run(make_plan(tmp_path, [spec], grace=1.0))
    assert result.exit_code == 0 and result.root_cause is None
    assert_nothing_left(mark, read_info(tmp_path, 0)["grandchildren"])


# -- signals to a real shim process --------------------------------------------------------------------------
def _start_driver(tmp_path: Path, plan: LaunchPlan) -> Tuple[subprocess.Popen[bytes], Path]:
    plan_file, result_file = tmp_path / "plan.json", tmp_path / "result.json"
    plan_file.write_text(json.dumps(plan.to_json()))
    with open(tmp_path / "driver.out", "wb") as out, open(tmp_path / "driver.err", "wb") as err:
        driver = subprocess.Popen(
            [PY, str(BIN / "driver.py"), str(plan_file), str(result_file)],
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    return driver, result_file


def _tree(tmp_path: Path, ranks: int) -> Tuple[List[Dict[str, Any]], List[int]]:
    infos = [read_info(tmp_path / "info", r) for r in range(ranks)]
    pids = [info["pid"] for info in infos] + [pid for info in infos for pid in info["grandchildren"]]
    assert all(alive(pid) for pid in pids)
    return infos, pids


def _sleepers(tmp_path: Path, mark: str, *extra: str) -> LaunchPlan:
    (tmp_path / "info").mkdir()
    args = ["--sleep", "90", "--spawn-grandchild", "--grandchild-setsid", "--info-dir", str(tmp_path / "info")]
    specs = [worker_spec(r, tmp_path / "logs", *args, *extra, mark=mark) for r in range(2)]
    return make_plan(tmp_path / "logs", specs, grace=1.0)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_to_the_shim_stops_everything(tmp_path: Path, sig: int, code: int) -> None:
    mark = new_mark()
    driver, result_file = _start_driver(tmp_path, _sleepers(tmp_path, mark))
    try:
        infos, pids = _tree(tmp_path, 2)
        driver.send_signal(sig)
        assert driver.wait(60) == code
    finally:
        driver.kill()
        driver.wait()
    result = json.loads(result_file.read_text())
    assert result == {"exit_code": code, "shim_signal": int(sig), "root_cause": None}
    assert_nothing_left(mark, pids, token=infos[0]["token"])


def test_second_signal_skips_the_grace_period(tmp_path: Path) -> None:
    mark = new_mark()
    plan = _sleepers(tmp_path, mark, "--ignore-term")
    plan = plan._replace(grace_period=600.0)  # only a second signal can end this
    driver, _ = _start_driver(tmp_path, plan)
    try:
        infos, pids = _tree(tmp_path, 2)
        driver.send_signal(signal.SIGTERM)
        assert wait_until(lambda: "ignoring SIGTERM" in (tmp_path / "logs" / "rank-0.log").read_text(), 30)
        driver.send_signal(signal.SIGTERM)
        assert driver.wait(60) == 143
    finally:
        driver.kill()
        driver.wait()
    assert_nothing_left(mark, pids, token=infos[0]["token"])


def test_sigkill_to_the_shim_leaves_cleanup_to_the_watchdog(tmp_path: Path) -> None:
    mark = new_mark()
    driver, _ = _start_driver(tmp_path, _sleepers(tmp_path, mark, "--ignore-term"))
    try:
        infos, pids = _tree(tmp_path, 2)
        driver.kill()
        assert driver.wait(30) == -signal.SIGKILL
    finally:
        driver.kill()
        driver.wait()
    # the ranks and grandchildren ignore SIGTERM: the watchdog must escalate to SIGKILL by itself
    assert_nothing_left(mark, pids, token=infos[0]["token"], timeout=15.0)
    assert not os.path.exists(tmp_path / "result.json")
