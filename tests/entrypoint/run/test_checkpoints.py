"""The checkpoint folder between attempts (``run/checkpoints.py``) and the scripts' helper (``checkpoint.py``), on
real folders: which one is offered, what retention removes, a save every rank takes part in (issue 39)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from malaunch.entrypoint import checkpoint
from malaunch.entrypoint.contract.config import Checkpoints, parse_shim_config
from malaunch.entrypoint.contract.errors import ConfigError
from malaunch.entrypoint.run.checkpoints import CheckpointKeeper


def _complete(root: Path, name: str, step: int, when: float = 1.0) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / ".complete").write_text(json.dumps({"step": step, "time": when, "ranks": 1}))
    return folder


def _keeper(root: Path, keep: int = 2, first_host: bool = True) -> Tuple[CheckpointKeeper, List[str]]:
    said: List[str] = []
    return CheckpointKeeper(Checkpoints(str(root), keep), first_host, said.append), said


def test_the_helper_module_exports_exactly_its_api() -> None:
    assert checkpoint.__all__ == ["Checkpoint", "directory", "folder_name", "latest", "progress", "rank_and_size",
                                  "resume_from", "save"]  # fmt: skip
    for name in checkpoint.__all__:
        assert getattr(checkpoint, name) is not None


def test_newest_is_the_recorded_step_not_the_folders_time(tmp_path: Path) -> None:
    late = _complete(tmp_path, "b-late", 5)
    early = _complete(tmp_path, "a-early", 9)
    os.utime(early, (1, 1))  # the newer checkpoint's folder looks oldest
    keeper, said = _keeper(tmp_path)
    assert keeper.before(1) == str(early)
    assert keeper.env({"X": "1", "MALAUNCH_RESUME_FROM": "/stale"}) == {"X": "1", "MALAUNCH_RESUME_FROM": str(early)}
    assert late.is_dir() and said == [f"attempt 1 resumes from {early} (step 9; MALAUNCH_RESUME_FROM)"]


def test_before_any_complete_one_the_variable_is_unset(tmp_path: Path) -> None:
    (tmp_path / "step-1").mkdir()
    keeper, said = _keeper(tmp_path)
    assert keeper.before(0) is None
    assert keeper.env({"MALAUNCH_RESUME_FROM": "/from/outside"}) == {}
    assert said == [f"checkpoint {tmp_path / 'step-1'} passed over: it has no .complete (a save that did not finish)"]
    assert (tmp_path / "step-1").is_dir()  # no complete one: nothing is older than it


@pytest.mark.parametrize("text, why", [("{}", "no whole-number 'step'"), ('{"step": -1}', "no whole-number"),
                                       ("\xff", "not JSON"), ('{"step": true}', "no whole-number")])  # fmt: skip
def test_a_damaged_marker_is_passed_over_with_a_line(tmp_path: Path, text: str, why: str) -> None:
    good = _complete(tmp_path, "step-3", 3)
    bad = tmp_path / "step-6"
    bad.mkdir()
    (bad / ".complete").write_text(text, encoding="latin-1")
    (bad / ".parts").mkdir()
    (bad / ".parts" / "rank-0").write_text('{"step": 6}')
    keeper, said = _keeper(tmp_path)
    assert keeper.before(1) == str(good)
    assert any(line.startswith(f"checkpoint {bad} passed over: its .complete is damaged") and why in line
               for line in said), said  # fmt: skip


def test_retention_keeps_keep_complete_and_never_the_one_being_written(tmp_path: Path) -> None:
    for step in (3, 6, 9, 12):
        _complete(tmp_path, f"step-{step:02d}", step)
    old_unfinished = tmp_path / "step-05"
    (old_unfinished / ".parts").mkdir(parents=True)
    (old_unfinished / ".parts" / "rank-0").write_text('{"step": 5}')
    writing = tmp_path / "step-15"
    (writing / ".parts").mkdir(parents=True)
    (writing / ".parts" / "rank-0").write_text('{"step": 15}')
    keeper, said = _keeper(tmp_path, keep=2)
    assert keeper.before(2) == str(tmp_path / "step-12")
    assert sorted(os.listdir(tmp_path)) == ["step-09", "step-12", "step-15"]
    assert "checkpoints removed (keeping the 2 newest complete): step-03, step-05, step-06" in said


def test_the_checkpoint_the_hosts_agree_on_is_resumed_from_even_with_a_newer_one_here(tmp_path: Path) -> None:
    """Several hosts: the coordinator's ``start`` named the checkpoint the hosts completed together; a complete one
    newer than it in this host's folder is passed over with a line, never removed, and retention counts from the
    agreed one (an older complete one beyond ``keep`` goes, an incomplete one older than the agreed one too)."""
    old = _complete(tmp_path, "step-2", 2)
    agreed = _complete(tmp_path, "step-4", 4)
    newer = [_complete(tmp_path, "step-6", 6), _complete(tmp_path, "step-8", 8)]
    half = tmp_path / "step-3"
    (half / ".parts").mkdir(parents=True)
    (half / ".parts" / "rank-0").write_text(json.dumps({"step": 3, "attempt": "0.0", "rank": 0, "ranks": 2}))
    keeper, said = _keeper(tmp_path, keep=1)
    keeper.agreed = "step-4"
    assert keeper.before(2) == str(agreed)
    assert keeper.env({}) == {"MALAUNCH_RESUME_FROM": str(agreed)}
    assert all(folder.is_dir() for folder in [agreed, *newer]) and not old.exists() and not half.exists()
    assert said[:2] == [f"checkpoint {folder} passed over: it is newer than step-4 (step 4), the newest checkpoint "
                        "the job's hosts completed together; resuming from that one on every host"
                        for folder in newer]  # fmt: skip
    assert said[-1] == f"attempt 2 resumes from {agreed} (step 4; MALAUNCH_RESUME_FROM)"
    keeper.agreed = None  # none agreed (no save completed since the coordinator started): the newest here
    assert keeper.before(3) == str(newer[1])


def test_every_host_prunes_its_own_folder_and_hosts_sharing_one_remove_the_same(tmp_path: Path) -> None:
    """A node whose folder is its own (ModelArts) keeps only ``keep`` too; two hosts pruning one shared folder
    remove the same sub-folders, the second finding them gone already."""
    own = tmp_path / "host-1"
    for step in (1, 2, 3):
        _complete(own, f"step-{step}", step)
    keeper, said = _keeper(own, keep=1, first_host=False)
    assert keeper.before(1) == str(own / "step-3")
    assert sorted(os.listdir(own)) == ["step-3"]
    assert "checkpoints removed (keeping the 1 newest complete): step-1, step-2" in said
    shared = tmp_path / "shared"
    for step in (1, 2, 3, 4):
        _complete(shared, f"step-{step}", step)
    host0, _ = _keeper(shared, keep=2)
    host1, said1 = _keeper(shared, keep=2, first_host=False)
    assert host0.before(2) == host1.before(2) == str(shared / "step-4")
    assert sorted(os.listdir(shared)) == ["step-3", "step-4"]
    assert not any("removed" in line for line in said1)  # nothing left for it to remove


def test_only_the_first_host_clears_stale_parts(tmp_path: Path) -> None:
    """A host that joins later (a replaced one) must not clear the parts of a save the others are writing."""
    (tmp_path / "step-9" / ".parts").mkdir(parents=True)
    (tmp_path / "step-9" / ".parts" / "rank-0").write_text("{}")
    keeper, _ = _keeper(tmp_path, first_host=False)
    keeper.clear_stale_parts()
    assert (tmp_path / "step-9" / ".parts" / "rank-0").exists()
    keeper, _ = _keeper(tmp_path)
    keeper.clear_stale_parts()
    assert not (tmp_path / "step-9" / ".parts").exists()


def test_an_unwritable_folder_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    keeper, _ = _keeper(tmp_path / "file" / "ckpt")
    with pytest.raises(ConfigError, match=r"MALAUNCH_CHECKPOINT_DIR.*not writable"):
        keeper.check()
    keeper, _ = _keeper(tmp_path / "new" / "ckpt")
    keeper.check()
    assert (tmp_path / "new" / "ckpt").is_dir() and os.listdir(tmp_path / "new" / "ckpt") == []


def test_the_config_reads_the_folder_and_keep() -> None:
    base = {"PATH": "/usr/bin"}
    assert parse_shim_config(base).checkpoints is None
    found = parse_shim_config({**base, "MALAUNCH_CHECKPOINT_DIR": "/ck", "MALAUNCH_CHECKPOINT_KEEP": "5"}).checkpoints
    assert found == Checkpoints("/ck", 5)
    assert parse_shim_config({**base, "MALAUNCH_CHECKPOINT_DIR": "/ck"}).checkpoints == Checkpoints("/ck", 2)
    with pytest.raises(ConfigError, match="MALAUNCH_CHECKPOINT_KEEP"):
        parse_shim_config({**base, "MALAUNCH_CHECKPOINT_KEEP": "0"})


def _env(root: Path, rank: int, attempt: int = 0) -> Dict[str, str]:
    return {"MALAUNCH_CHECKPOINT_DIR": str(root), "RANK": str(rank), "WORLD_SIZE": "2",
            "MALAUNCH_ATTEMPT": str(attempt)}  # fmt: skip


def test_save_is_complete_only_once_every_rank_finished(tmp_path: Path) -> None:
    with checkpoint.save(4, environ=_env(tmp_path, 0)) as folder:
        Path(folder, "rank-0.bin").write_text("zero")
    assert checkpoint.latest(str(tmp_path)) is None and checkpoint.resume_from(_env(tmp_path, 0)) is None
    with checkpoint.save(4, environ=_env(tmp_path, 1)) as folder:
        Path(folder, "rank-1.bin").write_text("one")
    found = checkpoint.latest(str(tmp_path))
    assert found is not None and (found.name, found.step) == ("step-00000004", 4)
    assert json.loads(Path(found.path, ".complete").read_text())["ranks"] == 2
    assert checkpoint.resume_from(_env(tmp_path, 0)) == found.path
    assert [name for name in os.listdir(found.path) if name.endswith(".tmp")] == []
    with pytest.raises(ValueError, match="complete already"), checkpoint.save(4, environ=_env(tmp_path, 0)):
        pass


def test_a_part_of_an_earlier_attempt_does_not_count(tmp_path: Path) -> None:
    with checkpoint.save(6, environ=_env(tmp_path, 1, attempt=0)):
        pass  # rank 1 finished in attempt 0; rank 0 was killed in that save
    with checkpoint.save(6, environ=_env(tmp_path, 0, attempt=1)):
        pass  # attempt 1: rank 0 is done, rank 1 not yet
    assert checkpoint.latest(str(tmp_path)) is None
    with checkpoint.save(6, environ=_env(tmp_path, 1, attempt=1)):
        pass
    assert checkpoint.latest(str(tmp_path)) is not None


def test_an_error_in_the_block_records_no_part(tmp_path: Path) -> None:
    for rank in (0, 1):
        with pytest.raises(RuntimeError), checkpoint.save(2, environ=_env(tmp_path, rank)):
            raise RuntimeError("disk full")
    assert checkpoint.latest(str(tmp_path)) is None


def test_stale_parts_of_an_earlier_run_are_cleared_at_start(tmp_path: Path) -> None:
    with checkpoint.save(6, environ=_env(tmp_path, 1)):
        pass
    keeper, _ = _keeper(tmp_path)
    keeper.clear_stale_parts()
    with checkpoint.save(6, environ=_env(tmp_path, 0)):
        pass  # the same attempt number in a new run of the job: rank 1's old part no longer counts
    assert checkpoint.latest(str(tmp_path)) is None


def test_progress_is_recorded_where_the_shim_reads_it(tmp_path: Path) -> None:
    touched = tmp_path / "progress"
    touched.write_text("")
    os.utime(touched, (1, 1))
    env = {**_env(tmp_path / "ck", 1), "MALAUNCH_PROGRESS_FILE": str(touched)}
    checkpoint.progress(7, 100, environ=env)
    assert touched.stat().st_mtime > 1
    record: Optional[Dict[str, object]] = json.loads((tmp_path / "ck" / ".progress" / "rank-1.json").read_text())
    assert record is not None and (record["step"], record["total"]) == (7, 100)
    checkpoint.progress(8, environ={"RANK": "0"})  # no folder, no file: nothing, no error


@pytest.mark.parametrize("damage", ["truncated", "empty", "a folder"])
def test_a_step_whose_marker_is_damaged_is_saved_again_and_completes(tmp_path: Path, damage: str) -> None:
    """The shim passes over a checkpoint whose ``.complete`` is damaged and resumes from the one before; the next
    save of that step must then replace the damaged marker with a whole one, not refuse the step as complete
    already (the job could never get past it) nor leave the damaged one (the save would never count)."""
    _complete(tmp_path, "step-00000002", 2)
    bad = tmp_path / "step-00000004"
    bad.mkdir()
    marker = bad / ".complete"
    if damage == "a folder":
        marker.mkdir()
    else:
        marker.write_text('{"step":' if damage == "truncated" else "")
    keeper, said = _keeper(tmp_path)
    assert keeper.before(1) == str(tmp_path / "step-00000002")
    assert said[0].startswith(f"checkpoint {bad} passed over: its .complete "), said
    for rank in (0, 1):
        with checkpoint.save(4, environ=_env(tmp_path, rank, attempt=1)) as folder:
            Path(folder, f"rank-{rank}.bin").write_text(str(rank))
    found = checkpoint.latest(str(tmp_path))
    assert found is not None and (found.path, found.step) == (str(bad), 4)
    assert json.loads(marker.read_text())["ranks"] == 2
    assert keeper.before(2) == str(bad) and [name for name in os.listdir(bad) if name.endswith(".tmp")] == []


class _Index:
    """An integer scalar of another library (numpy's ``int64``, a one-element integer tensor of torch): not an
    ``int``, but a whole number through ``__index__``."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value

    def __repr__(self) -> str:
        return f"int64({self.value})"


def test_an_integer_scalar_of_numpy_or_torch_is_a_step(tmp_path: Path) -> None:
    """``checkpoint.progress(step)`` with a numpy or torch integer (a training loop's own counter) must record it,
    not end the training with ``TypeError: Object of type int64 is not JSON serializable``; ``save`` takes it
    as the whole number it is."""
    env = {**_env(tmp_path / "ck", 0), "WORLD_SIZE": "1", "MALAUNCH_PROGRESS_DIR": str(tmp_path / "progress")}
    checkpoint.progress(_Index(7), _Index(100), environ=env)  # type: ignore[arg-type]
    record = json.loads((tmp_path / "progress" / "rank-0.json").read_text())
    assert (record["step"], record["total"]) == (7, 100)
    with checkpoint.save(_Index(8), environ=env) as folder:  # type: ignore[arg-type]
        assert folder == str(tmp_path / "ck" / "step-00000008")
    found = checkpoint.latest(str(tmp_path / "ck"))
    assert found is not None and found.step == 8


@pytest.mark.parametrize("step, shown", [(2.5, "2.5 (float)"), ("3", "'3' (str)"), (None, "None (NoneType)"),
                                         (-1, "-1 (int)"), (True, "True (bool)")])  # fmt: skip
def test_a_step_that_is_no_whole_number_is_refused_with_its_value_and_type(tmp_path: Path, step: object,
                                                                          shown: str) -> None:  # fmt: skip
    """What is wrong, its value and its type, and what to pass: not an internal ``TypeError`` from a comparison
    (``'<' not supported between instances of 'str' and 'float'``), nor a record the readers drop."""
    env = {**_env(tmp_path / "ck", 0), "MALAUNCH_PROGRESS_DIR": str(tmp_path / "progress")}
    for call in (lambda: checkpoint.progress(step, environ=env),  # type: ignore[arg-type]
                 lambda: checkpoint.save(step, environ=env).__enter__()):  # type: ignore[arg-type]  # fmt: skip
        with pytest.raises(ValueError) as raised:
            call()
        assert f"step must be a whole number >= 0, not {shown}" in str(raised.value)
    assert not (tmp_path / "progress").exists()
    with pytest.raises(ValueError, match=r"total must be a whole number >= 0 or None, not 'x' \(str\)"):
        checkpoint.progress(1, "x", environ=env)  # type: ignore[arg-type]


def test_a_checkpoint_folder_that_is_a_file_or_a_link_loop_says_so(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    keeper, _ = _keeper(tmp_path / "file")
    with pytest.raises(ConfigError, match=r"not writable \(it is a file, not a folder\)"):
        keeper.check()
    os.symlink(tmp_path / "loop-b", tmp_path / "loop-a")
    os.symlink(tmp_path / "loop-a", tmp_path / "loop-b")
    keeper, _ = _keeper(tmp_path / "loop-a")
    with pytest.raises(ConfigError, match=r"not writable \(Too many levels of symbolic links\)"):
        keeper.check()


def test_a_checkpoint_folder_gone_between_attempts_is_said(tmp_path: Path) -> None:
    """The folder held a complete checkpoint before attempt 0; gone (or replaced by a file) before attempt 1, the
    attempt starts from the beginning, and the console says why, not nothing."""
    root = tmp_path / "ck"
    _complete(root, "step-00000002", 2)
    keeper, said = _keeper(root)
    keeper.check()
    assert keeper.before(0) == str(root / "step-00000002")
    for replaced in ("gone", "a file"):
        said.clear()
        shutil.rmtree(root, ignore_errors=True)
        if replaced == "a file":
            root.write_text("")
        assert keeper.before(1) is None and keeper.env({}) == {}
        why = "No such file or directory" if replaced == "gone" else "it is a file, not a folder"
        assert said == [f"checkpoint folder {root} cannot be read before attempt 1 ({why}): no checkpoint to "
                        "resume from, so attempt 1 starts from the beginning; it held step-00000002 (step 2) "
                        "before attempt 0: restore it, or point MALAUNCH_CHECKPOINT_DIR at the folder that "
                        "holds it"]  # fmt: skip


def test_a_checkpoint_being_removed_is_never_seen_half_removed(tmp_path: Path) -> None:
    """Hosts sharing one folder prune it at the same time (local, Volcano). Another host's scan of a checkpoint
    retention was removing file by file saw it without its ``.complete`` and said, wrongly, ``checkpoint
    …/step-00000002 passed over: it has no .complete (a save that did not finish)`` (seen with two hosts through the
    local backend), or saw its marker with part of its data gone. A checkpoint leaves its name at once, whole."""
    files = 400
    for step in (1, 2, 3, 4):
        folder = _complete(tmp_path, f"step-{step}", step)
        for number in range(files):
            (folder / f"shard-{number}").write_text("x")
    (tmp_path / ".removing-step-0-123-abcdef" / "shard-0").mkdir(parents=True)  # a removal a killed shim left
    doomed = ["step-1", "step-2", "step-3"]
    seen: List[Tuple[str, int, bool]] = []  # (name, files found, marker found) of every doomed folder seen
    keeper, said = _keeper(tmp_path, keep=1, first_host=False)
    pruning = threading.Thread(target=keeper.before, args=(1,))
    pruning.start()
    while pruning.is_alive() or len(seen) < 3:
        for name in doomed:
            with contextlib.suppress(OSError):
                names = os.listdir(tmp_path / name)
                seen.append((name, len([item for item in names if item.startswith("shard-")]), ".complete" in names))
    pruning.join()
    assert sorted(os.listdir(tmp_path)) == ["step-4"]
    assert said[0] == "checkpoints removed (keeping the 1 newest complete): step-1, step-2, step-3"
    half = [item for item in seen if item[1:] != (files, True)]
    assert not half, f"{len(half)} of {len(seen)} views of a checkpoint being removed saw it half removed: {half[:3]}"


def test_a_save_whose_marker_or_part_cannot_be_written_says_so_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    """A full disk while the last rank writes ``.complete`` (its temporary file links to /dev/full, which refuses
    every write with ENOSPC): the save is not complete, the error says which checkpoint and what could not be
    written, not a bare ``[Errno 28] No space left on device``, and no ``.complete-*.tmp`` is left in the folder.
    A part that cannot be recorded says so the same way."""
    env = {**_env(tmp_path, 0), "WORLD_SIZE": "1"}
    target = tmp_path / "step-00000004"
    (target / ".parts").mkdir(parents=True)
    os.symlink("/dev/full", target / f".complete-0-{os.getpid()}.tmp")
    with pytest.raises(OSError) as raised, checkpoint.save(4, environ=env):
        pass
    assert str(raised.value) == (f"[Errno 28] checkpoint {target} (step 4) is not complete: its .complete could not "
                                 "be written (No space left on device): fix the checkpoint folder's file system "
                                 "(full? read-only?); the next attempt resumes from the newest complete "
                                 "checkpoint")  # fmt: skip
    assert sorted(os.listdir(target)) == [".parts"] and checkpoint.latest(str(tmp_path)) is None
    (tmp_path / "step-00000006" / ".parts" / "rank-0").mkdir(parents=True)  # the part's name is taken
    with pytest.raises(OSError, match=r"checkpoint .*step-00000006 \(step 6\) is not complete: rank 0's part could "
                                      r"not be recorded \(Is a directory\)"), checkpoint.save(6, environ=env):
        pass
