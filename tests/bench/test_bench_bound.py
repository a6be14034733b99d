"""The start-up bound (``bench/workers/plan_then_fork.py``) still plans with the shim's own modules and starts every
rank: it imports the shim's internals, so a change of theirs must break this test, not the bench's figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from shimutil import assert_nothing_left

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from mabench.commands import v10_rank_table  # noqa: E402

MARK_VAR = "BENCH_BOUND_TEST_MARK"


@pytest.mark.process
def test_the_bound_plans_with_the_shim_and_starts_every_rank(tmp_path: Path) -> None:
    table = tmp_path / "rank_table.json"
    table.write_text(json.dumps(v10_rank_table(1, 3)))
    out = tmp_path / "out"
    out.mkdir()
    mark = uuid.uuid4().hex
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MA_", "VC_", "MALAUNCH_"))}
    env.update({MARK_VAR: mark, "MA_RUN_METHOD": "ranktable", "RANK_TABLE_FILE": str(table),
                "MALAUNCH_LOG_DIR": str(tmp_path / "logs"), "BENCH_OUT": str(out)})  # fmt: skip
    bound, worker = (REPO / "bench" / "workers" / name for name in ("plan_then_fork.py", "start_worker.py"))
    done = subprocess.run([sys.executable, str(bound), str(worker)], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(list(out.glob("start-*"))) == 3, sorted(os.listdir(out))
    assert sorted(path.name for path in (tmp_path / "logs").glob("rank-*.log")) == [
        "rank-0.log", "rank-1.log", "rank-2.log"
    ]
    assert "Traceback" not in done.stderr
    assert_nothing_left(mark, variable=MARK_VAR)
