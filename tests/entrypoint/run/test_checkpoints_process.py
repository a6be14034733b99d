"""Checkpoints across restarts with real processes (issue 39): the real shim, the fan-out and torchrun, gloo on CPU.

``ckpt_train.py`` trains deterministically and saves through ``malaunch.entrypoint.checkpoint``; a run with a rank
killed mid-run or in the middle of a save ends with final weights equal, byte for byte, to a run without a
failure, trains no step twice more than one checkpoint interval, and the shim's console says what it passed over.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from shimutil import SCRIPTS, assert_nothing_left, free_port, marked_env, shim, write_v10_table

pytestmark = [pytest.mark.process, pytest.mark.torch]

TRAIN = str(SCRIPTS / "ckpt_train.py")
TOTAL, EVERY = 12, 3


def _env(tmp_path: Path, method: str, keep: str = "2", fmt: str = "torch") -> Dict[str, str]:
    base = {"MALAUNCH_GRACE_PERIOD": "5", "MALAUNCH_LOG_DIR": str(tmp_path / "logs"), "MA_MAX_RESTARTS": "2",
            "MALAUNCH_RESTART_BACKOFF": "0.2", "MALAUNCH_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
            "MALAUNCH_CHECKPOINT_KEEP": keep, "CKPT_TRAIN_FORMAT": fmt}  # fmt: skip
    if method == "torchrun":
        base.update(MA_RUN_METHOD="torchrun", MA_NUM_GPUS="2", MA_TORCHRUN_MASTER_PORT=str(free_port()))
    else:
        write_v10_table(tmp_path / "table.json", servers=1, devices=2)
        base.update(RANK_TABLE_FILE=str(tmp_path / "table.json"), MALAUNCH_MASTER_PORT=str(free_port()))
    return marked_env(base)


def _run(tmp_path: Path, method: str, fault: str, keep: str = "2",
         fmt: str = "torch") -> Tuple[str, Dict[str, str], List[int]]:  # fmt: skip
    """Run the training; its console, final weights and every step rank 0 trained (in order)."""
    out = tmp_path / "out"
    out.mkdir()
    env = _env(tmp_path, method, keep, fmt)
    done = shim([TRAIN, str(out), str(TOTAL), str(EVERY), fault], env, tmp_path, timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])
    trained = [json.loads(line)["step"] for line in (out / "trained-0.jsonl").read_text().splitlines()]
    final: Dict[str, str] = json.loads((out / "final.json").read_text())
    return done.stderr, final, trained


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """The weights of a run without a failure."""
    console, final, trained = _run(tmp_path_factory.mktemp("clean"), "ranktable", "none")
    assert trained == list(range(1, TOTAL + 1))
    assert "resumes from" not in console
    return final


def _twice(trained: List[int]) -> int:
    return sum(count - 1 for count in Counter(trained).values())


@pytest.mark.parametrize("method", ["ranktable", "torchrun"])
def test_a_rank_killed_mid_run_resumes_bit_for_bit(tmp_path: Path, method: str, reference: Dict[str, str]) -> None:
    damaged = tmp_path / "ckpt" / "step-99999999"
    damaged.mkdir(parents=True)
    (damaged / ".complete").write_text("not json")
    console, final, trained = _run(tmp_path, method, "run:1:8", keep="1")
    assert final == reference
    assert sorted(set(trained)) == list(range(1, TOTAL + 1)) and 0 < _twice(trained) <= EVERY
    ckpt = tmp_path / "ckpt"
    assert f"checkpoint {damaged} passed over: its .complete is damaged (not JSON: 'not json')" in console
    assert f"attempt 1 resumes from {ckpt / 'step-00000006'} (step 6" in console
    assert "checkpoints removed (keeping the 1 newest complete): step-00000003" in console
    assert (ckpt / "step-00000012" / ".complete").is_file()
    out = tmp_path / "logs" / "attempt-1"
    assert f"MALAUNCH_RESUME_FROM={ckpt / 'step-00000006'}" in "".join(p.read_text() for p in out.glob("rank-*.log"))


@pytest.mark.parametrize("method", ["ranktable", "torchrun"])
def test_a_rank_killed_in_a_save_resumes_from_the_one_before(tmp_path: Path, method: str,
                                                             reference: Dict[str, str]) -> None:  # fmt: skip
    console, final, trained = _run(tmp_path, method, "save:1:9")
    assert final == reference
    assert 0 < _twice(trained) <= EVERY
    ckpt = tmp_path / "ckpt"
    half = ckpt / "step-00000009"
    assert f"checkpoint {half} passed over: it has no .complete (a save that did not finish); resuming from " \
           "step-00000006 (step 6)" in console  # fmt: skip
    assert f"attempt 1 resumes from {ckpt / 'step-00000006'} (step 6; the ranks had reached step 9" in console
    assert "checkpoints removed" not in console  # the newest complete one and the unfinished one stay
    marker = json.loads((half / ".complete").read_text())  # the next attempt saved step 9 again, whole
    assert (marker["step"], marker["ranks"]) == (9, 2)
    log0 = (tmp_path / "logs" / "attempt-0" / "rank-0.log").read_text()
    assert "MALAUNCH_RESUME_FROM=None" in log0


def test_torchs_distributed_checkpoint_works_unchanged_with_the_helper(tmp_path: Path,
                                                                     reference: Dict[str, str]) -> None:  # fmt: skip
    """Every rank saves its shards into the one folder with torch.distributed.checkpoint inside checkpoint.save;
    after rank 1 is killed mid-run every rank loads it back from MALAUNCH_RESUME_FROM."""
    console, final, trained = _run(tmp_path, "torchrun", "run:1:8", fmt="dcp")
    assert final == reference
    assert sorted(set(trained)) == list(range(1, TOTAL + 1)) and 0 < _twice(trained) <= EVERY
    ckpt = tmp_path / "ckpt"
    assert f"attempt 1 resumes from {ckpt / 'step-00000006'} (step 6" in console
    newest = ckpt / f"step-{TOTAL:08d}"
    assert (newest / ".metadata").is_file() and list(newest.glob("*.distcp")), sorted(newest.iterdir())
    assert json.loads((newest / ".complete").read_text())["ranks"] == 2


def test_a_checkpoint_folder_that_cannot_be_written_exits_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    env = _env(tmp_path, "ranktable")
    env["MALAUNCH_CHECKPOINT_DIR"] = str(tmp_path / "a-file" / "ckpt")
    done = shim([TRAIN, str(tmp_path), "4", "2", "none"], env, tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "MALAUNCH_CHECKPOINT_DIR" in lines[0] and "not writable" in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "logs").exists() or not list((tmp_path / "logs").rglob("rank-*.log"))
