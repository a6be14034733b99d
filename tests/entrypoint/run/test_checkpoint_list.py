"""Listing a checkpoint folder and starting from another job's checkpoint (``contract/checkpoint_list.py``,
``MALAUNCH_RESUME_SOURCE`` in ``run/checkpoints.py``), on real folders (issue 39, item 3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional, Tuple

import pytest
from malaunch.entrypoint import public
from malaunch.entrypoint.contract import checkpoint_list
from malaunch.entrypoint.contract.checkpoint_list import list_checkpoints, resume_point
from malaunch.entrypoint.contract.config import Checkpoints, parse_shim_config
from malaunch.entrypoint.contract.errors import ConfigError, exit_code_for
from malaunch.entrypoint.run.checkpoints import CheckpointKeeper


def _complete(root: Path, name: str, step: int, when: float = 100.0, size: int = 10) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "rank-0.pt").write_bytes(b"x" * size)
    (folder / ".complete").write_text(json.dumps({"step": step, "time": when, "ranks": 1}))
    return folder


def _unfinished(root: Path, name: str, step: Optional[int]) -> Path:
    folder = root / name
    (folder / ".parts").mkdir(parents=True)
    if step is not None:
        (folder / ".parts" / "rank-0").write_text(json.dumps({"step": step, "attempt": "0.0", "rank": 0}))
    return folder


def test_the_module_exports_exactly_its_api() -> None:
    assert checkpoint_list.__all__ == ["BEING_WRITTEN", "COMPLETE", "DAMAGED", "NO_MARKER", "PARTS_MISSING",
                                       "STATES", "CheckpointRow", "checkpoint_rows", "folder_size", "found_of",
                                       "list_checkpoints", "resume_point"]  # fmt: skip
    assert public.list_checkpoints is list_checkpoints and public.resume_point is resume_point


def test_a_listing_says_each_folders_step_time_size_and_why_it_is_not_complete(tmp_path: Path) -> None:
    _complete(tmp_path, "step-3", 3, when=100.0, size=7)
    _complete(tmp_path, "step-6", 6, when=200.0, size=11)
    damaged = tmp_path / "step-9"
    damaged.mkdir()
    (damaged / ".complete").write_text("half")
    _unfinished(tmp_path, "step-12", 12)
    (tmp_path / ".progress").mkdir()  # not a checkpoint
    rows = list_checkpoints(str(tmp_path))
    assert [(row.name, row.step, row.state) for row in rows] == [
        ("step-9", None, "damaged marker"), ("step-3", 3, "complete"), ("step-6", 6, "complete"),
        ("step-12", 12, "no marker")]  # fmt: skip
    by_name = {row.name: row for row in rows}
    assert by_name["step-3"].size == 7 + len(json.dumps({"step": 3, "time": 100.0, "ranks": 1}))
    assert by_name["step-6"].time == 200.0 and by_name["step-6"].why == "" and by_name["step-6"].complete
    assert "not JSON" in by_name["step-9"].why and not by_name["step-9"].complete
    assert by_name["step-12"].why == "it has no .complete (a save that did not finish)"
    assert json.loads(json.dumps(by_name["step-6"].to_json())) == {
        "name": "step-6", "path": str(tmp_path / "step-6"), "step": 6, "time": 200.0, "size": by_name["step-6"].size,
        "complete": True, "state": "complete", "why": ""}  # fmt: skip


def test_an_unmarked_folder_newer_than_every_complete_one_is_being_written_while_the_job_runs(tmp_path: Path) -> None:
    _complete(tmp_path, "step-3", 3)
    _unfinished(tmp_path, "step-1", 1)
    _unfinished(tmp_path, "step-6", 6)
    states = {row.name: row.state for row in list_checkpoints(str(tmp_path), running=True)}
    assert states == {"step-1": "no marker", "step-3": "complete", "step-6": "being written"}
    assert {row.name: row.state for row in list_checkpoints(str(tmp_path))}["step-6"] == "no marker"
    assert list_checkpoints(str(tmp_path / "missing")) == []


def test_a_complete_checkpoint_folder_is_its_own_resume_point(tmp_path: Path) -> None:
    folder = _complete(tmp_path, "step-3", 3)
    _complete(tmp_path, "step-6", 6)
    found = resume_point(str(folder))
    assert not isinstance(found, str) and found.path == str(folder) and found.step == 3


def test_a_folder_meant_as_one_checkpoint_is_judged_as_one(tmp_path: Path) -> None:
    rank_folders = tmp_path / "step-5"
    (rank_folders / "rank_0").mkdir(parents=True)  # per-rank folders, no marker, no parts: not a folder of them
    found = resume_point(str(rank_folders), one=True)
    assert isinstance(found, str) and found.startswith(f"checkpoint {rank_folders} is not complete: it has no")
    assert "holds no complete checkpoint" in str(resume_point(str(rank_folders)))


def test_a_folder_of_checkpoints_resumes_from_its_newest_complete_one(tmp_path: Path) -> None:
    _complete(tmp_path, "step-3", 3)
    _complete(tmp_path, "step-6", 6)
    _unfinished(tmp_path, "step-9", 9)
    found = resume_point(str(tmp_path))
    assert not isinstance(found, str) and found.name == "step-6"


@pytest.mark.parametrize("case, why", [
    ("missing", "is not a folder (missing)"),
    ("unfinished", "is not complete: it has no .complete (a save that did not finish)"),
    ("damaged", "is not complete: its .complete is damaged (not JSON"),
    ("empty", "holds no checkpoint"),
    ("none-complete", "holds no complete checkpoint (step-1: it has no .complete"),
])  # fmt: skip
def test_a_source_with_nothing_complete_says_which_folder_and_why(tmp_path: Path, case: str, why: str) -> None:
    source = tmp_path / "src"
    if case == "unfinished":
        _unfinished(tmp_path, "src", 4)
    elif case == "damaged":
        source.mkdir()
        (source / ".complete").write_text("{")
    elif case == "empty":
        source.mkdir()
    elif case == "none-complete":
        _unfinished(source, "step-1", 1)
    found = resume_point(str(source))
    assert isinstance(found, str) and str(source) in found and why in found, found


def _keeper(own: Path, source: Optional[Path]) -> Tuple[CheckpointKeeper, List[str]]:
    said: List[str] = []
    config = Checkpoints(str(own), 2, None if source is None else str(source))
    return CheckpointKeeper(config, True, said.append), said


def test_the_source_is_offered_until_the_jobs_own_folder_holds_a_complete_one(tmp_path: Path) -> None:
    old = tmp_path / "old"
    _complete(old, "step-3", 3)
    _complete(old, "step-6", 6)
    own = tmp_path / "own"
    keeper, said = _keeper(own, old)
    keeper.check()
    assert keeper.before(0) == str(old / "step-6")
    assert keeper.env({"MALAUNCH_RESUME_SOURCE": str(old)})["MALAUNCH_RESUME_FROM"] == str(old / "step-6")
    assert said == [f"attempt 0 resumes from another job's checkpoint {old / 'step-6'} (step 6; MALAUNCH_RESUME_FROM, "
                    "from MALAUNCH_RESUME_SOURCE)"]  # fmt: skip
    _unfinished(own, "step-8", 8)  # a save of this job that did not finish: the source still holds
    assert keeper.before(1) == str(old / "step-6")
    _complete(own, "step-9", 9)
    assert keeper.before(2) == str(own / "step-9")
    assert (old / "step-3").is_dir() and (old / "step-6").is_dir()  # another job's folder is never pruned


@pytest.mark.parametrize("make", ["unfinished", "nothing"])
def test_a_source_with_no_complete_checkpoint_is_refused_at_start(tmp_path: Path, make: str) -> None:
    old = tmp_path / "old"
    if make == "unfinished":
        source = _unfinished(old, "step-4", 4)
    else:
        source = old
        old.mkdir()
    keeper, _ = _keeper(tmp_path / "own", source)
    with pytest.raises(ConfigError) as caught:
        keeper.check()
    assert exit_code_for(caught.value) == 2 and caught.value.variable == "MALAUNCH_RESUME_SOURCE"
    assert str(source) in str(caught.value) and "ma-submit checkpoints JOB_ID" in str(caught.value)


def test_a_source_needs_a_checkpoint_folder_of_the_jobs_own(tmp_path: Path) -> None:
    env = {"MA_NUM_HOSTS": "1", "MA_NUM_GPUS": "1", "MALAUNCH_RESUME_SOURCE": str(tmp_path)}
    with pytest.raises(ConfigError) as caught:
        parse_shim_config(env)
    assert "set MALAUNCH_CHECKPOINT_DIR too" in str(caught.value)
    config = parse_shim_config({**env, "MALAUNCH_CHECKPOINT_DIR": str(tmp_path / "own")})
    assert config.checkpoints is not None and config.checkpoints.source == str(tmp_path)
