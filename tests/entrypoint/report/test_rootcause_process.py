"""Two deaths 20 ms apart with the shim stopped across them (issue 16.1): real processes, both orders, the
fan-out and torchrun. The shim sees both deaths in the same look; the evidence in the logs must decide."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Dict, Tuple

import pytest
from shimutil import (
    MARK,
    SCRIPTS,
    assert_nothing_left,
    free_port,
    marked_env,
    start_shim,
    wait_watched,
    write_v10_table,
)

# case -> the exit code of the root cause (always the rank that died first)
EXPECTED = {"exit": 7, "abort": 134, "terminate": 5}


def _env(method: str, tmp_path: Path) -> Dict[str, str]:
    extra = {"MALAUNCH_REPORT_FILE": str(tmp_path / "report.json"), "MALAUNCH_LOG_DIR": str(tmp_path / "logs"),
             "MALAUNCH_GRACE_PERIOD": "5"}  # fmt: skip
    if method == "torchrun":
        extra.update({"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2",
                      "MA_TORCHRUN_MASTER_PORT": str(free_port())})  # fmt: skip
    elif method == "msrun":
        extra.update({"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": "2", "MA_MSRUN_MASTER_PORT": str(free_port())})
    else:
        write_v10_table(tmp_path / "table.json", servers=1, devices=2)
        extra.update(RANK_TABLE_FILE=str(tmp_path / "table.json"), MALAUNCH_MASTER_PORT=str(free_port()))
    return marked_env(extra)


def run_two_deaths(
    tmp_path: Path, method: str, case: str, first: int, stop: bool, script: str = "peer_death.py", span: float = 0.6
) -> Tuple[int, dict]:
    """Start the job, stop the shim across the two deaths (``stop``), continue it; the exit code and report."""
    folder = tmp_path / "sync"
    folder.mkdir()
    env = _env(method, tmp_path)
    args = [case, str(first)] if script == "peer_death.py" else []
    proc = start_shim([str(SCRIPTS / script), str(folder), *args], env, tmp_path)
    try:
        deadline = time.monotonic() + 120
        while len(list(folder.glob("ready-*"))) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        if method != "fanout":  # the launcher's workers: the shim's watch has found both (the fan-out's are its own)
            wait_watched(proc, 2)
        at = time.time() + 0.3
        (folder / "go.tmp").write_text(repr(at))
        os.replace(folder / "go.tmp", folder / "go")
        if stop:
            os.kill(proc.pid, signal.SIGSTOP)
            time.sleep(max(0.0, at + span - time.time()))  # both ranks are dead meanwhile
            os.kill(proc.pid, signal.SIGCONT)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()
    assert_nothing_left(env[MARK])
    report = json.loads((tmp_path / "report.json").read_text())
    return proc.returncode, report


def _check(code: int, report: dict, case: str, first: int) -> None:
    cause = report["root_cause"]
    assert (code, cause["rank"], cause["exit_code"]) == (EXPECTED[case], first, EXPECTED[case]), cause
    # torchrun may SIGTERM the other rank before it dies on its own: then that death is the teardown's
    assert cause["why"].startswith(f"rank {1 - first} failed after a peer: ") or cause["why"] == "the only failure"


@pytest.mark.process
@pytest.mark.parametrize("repeat", range(3))
@pytest.mark.parametrize("first", [0, 1])
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_fan_out_orders_two_deaths_in_one_look_by_evidence(
    tmp_path: Path, case: str, first: int, repeat: int
) -> None:
    code, report = run_two_deaths(tmp_path, "fanout", case, first, stop=True)
    _check(code, report, case, first)


@pytest.mark.process
@pytest.mark.parametrize("first", [0, 1])
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_torchrun_orders_two_deaths_in_one_look_by_evidence(tmp_path: Path, case: str, first: int) -> None:
    code, report = run_two_deaths(tmp_path, "torchrun", case, first, stop=True)
    _check(code, report, case, first)


@pytest.mark.process
@pytest.mark.mindspore
@pytest.mark.parametrize("first", [0, 1])
@pytest.mark.parametrize("case", ["abort", "exit"])
def test_msrun_orders_two_deaths_in_one_look_by_evidence(tmp_path: Path, case: str, first: int) -> None:
    # msrun kills the other workers with SIGKILL once it sees a death (collateral): it may get there first
    code, report = run_two_deaths(tmp_path, "msrun", case, first, stop=True)
    _check(code, report, case, first)


@pytest.mark.process
@pytest.mark.parametrize("method", ["fanout", "torchrun"])
@pytest.mark.parametrize("first", [0, 1])
@pytest.mark.parametrize("case", ["abort", "exit"])
def test_deaths_without_a_stopped_shim_both_orders(tmp_path: Path, method: str, case: str, first: int) -> None:
    # the teardown's SIGTERM may reach the other rank first (then it is the only failure); sys.exit's shutdown
    # can outlast os.abort 20 ms later: seen in order or not, the right rank
    code, report = run_two_deaths(tmp_path, method, case, first, stop=False)
    cause = report["root_cause"]
    assert (code, cause["rank"]) == (EXPECTED[case], first), cause
    assert cause["why"] in (f"rank {1 - first} failed after a peer: 'Connection closed by peer'",
                            "the earliest failure seen", "the only failure"), cause["why"]  # fmt: skip


@pytest.mark.process
@pytest.mark.parametrize("first", [0, 1])
# (torchrun is not stopped with the shim: it would stop the slower rank itself while the shim sleeps, and then
# that rank dies by torchrun's SIGTERM, collateral; so under torchrun only the case the pause serves)
@pytest.mark.parametrize(("method", "stop"), [("fanout", True), ("fanout", False), ("fanout", False),
                                              ("torchrun", False), ("torchrun", False)])  # fmt: skip
def test_a_consequence_that_dies_first_is_not_the_root_cause(
    tmp_path: Path, method: str, first: int, stop: bool
) -> None:
    # issue 29.2: the real failure closes its connection and takes 2 s to exit 7 (an interpreter tearing down);
    # its peer aborts at once on "Connection closed by peer", so it dies first. Seen in that order (or in one
    # look, the shim stopped across both), the plain death within PEER_WINDOW after it is the root cause: the
    # ending holds its stop signal meanwhile (and pauses torchrun, which would stop it), so that rank dies by itself
    code, report = run_two_deaths(tmp_path, method, "slow", first, stop=stop, span=2.6)
    cause = report["root_cause"]
    assert (code, cause["rank"], cause["exit_code"]) == (7, first, 7), cause
    assert cause["why"] == f"rank {1 - first} failed after a peer: 'terminate called without an active exception'"


@pytest.mark.process
@pytest.mark.torch
@pytest.mark.parametrize("stop", [True, True, False])
def test_real_torch_peer_of_a_rank_that_exited_is_not_the_root_cause(tmp_path: Path, stop: bool) -> None:
    code, report = run_two_deaths(tmp_path, "torchrun", "", 1, stop=stop, script="torch_destroy_after_peer.py")
    cause = report["root_cause"]
    assert (code, cause["rank"], cause["exit_code"]) == (5, 1, 5), cause
    # rank 0 died of torchrun's SIGTERM (collateral), or by itself after its peer: never a plain earlier death
    assert cause["why"] == "the only failure" or cause["why"].startswith("rank 0 failed after a peer: "), cause


@pytest.mark.process
@pytest.mark.parametrize("culprit", [2, 0])
@pytest.mark.parametrize("method", ["fanout", pytest.param("torchrun", marks=pytest.mark.torch)])
def test_every_other_rank_dying_of_the_culprit_first_keeps_the_hold_until_it_dies_itself(
    tmp_path: Path, method: str, culprit: int
) -> None:
    # three ranks: the culprit takes 2 s to exit 7; both others abort on "Connection closed by peer" before it.
    # The second such death does not end the hold (it names a peer's failure too): the culprit dies by itself
    folder = tmp_path / "sync"
    folder.mkdir()
    env = {**_env(method, tmp_path), "MA_NUM_GPUS": "3"}
    if method == "fanout":
        write_v10_table(tmp_path / "table.json", servers=1, devices=3)
    proc = start_shim([str(SCRIPTS / "peer_death.py"), str(folder), "slow", str(culprit), "3"], env, tmp_path)
    try:
        deadline = time.monotonic() + 120
        while len(list(folder.glob("ready-*"))) < 3:
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        if method == "torchrun":
            wait_watched(proc, 3)
        (folder / "go.tmp").write_text(repr(time.time() + 0.3))
        os.replace(folder / "go.tmp", folder / "go")
        err = proc.communicate(timeout=120)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert_nothing_left(env[MARK])
    cause = json.loads((tmp_path / "report.json").read_text())["root_cause"]
    assert (proc.returncode, cause["rank"], cause["exit_code"]) == (7, culprit, 7), (cause, err[-2000:])
    assert "failed after a peer" in cause["why"], cause["why"]
