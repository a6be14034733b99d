"""The checkpoint folder given as a relative path, through the real shim: every rank gets it, and the folder to
resume from, as absolute paths, as the shim's log folder is, so a script that changes its working folder saves and
resumes where the shim keeps and prunes its checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shimutil import SCRIPTS, assert_nothing_left, marked_env, shim

pytestmark = [pytest.mark.process]


def test_a_relative_checkpoint_folder_is_given_to_the_ranks_as_an_absolute_one(tmp_path: Path) -> None:
    """``MALAUNCH_CHECKPOINT_DIR=ckpt``: a rank that changes its folder saved into ``<its new folder>/ckpt``, where
    the shim never looked (no resume line, no retention; the helper's own fallback found them), and was handed
    ``MALAUNCH_RESUME_FROM=ckpt/step-…``, which from its new folder names nothing."""
    (tmp_path / "elsewhere").mkdir()
    out = tmp_path / "out.json"
    env = marked_env({"MALAUNCH_LOG_DIR": "logs", "MALAUNCH_CHECKPOINT_DIR": "ckpt", "MA_MAX_RESTARTS": "1",
                      "MALAUNCH_RESTART_BACKOFF": "0", "MALAUNCH_CHECKPOINT_KEEP": "1"})  # fmt: skip
    done = shim([str(SCRIPTS / "ckpt_chdir.py"), str(tmp_path / "elsewhere"), str(out), "4"], env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])
    ckpt = tmp_path / "ckpt"
    assert f"attempt 1 resumes from {ckpt / 'step-00000002'} (step 2" in done.stderr, done.stderr[-3000:]
    assert json.loads(out.read_text()) == {"resume": str(ckpt / "step-00000002"), "counted": [3, 4]}
    assert sorted(path.name for path in ckpt.iterdir()) == ["step-00000002", "step-00000003", "step-00000004"]
    assert not (tmp_path / "elsewhere" / "ckpt").exists()
