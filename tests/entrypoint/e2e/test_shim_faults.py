"""Faults around the launch, through the real shim: late hosts and rank tables, unresolvable names, bad dirs."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from shimutil import (
    MARK,
    SCRIPTS,
    assert_nothing_left,
    free_port,
    marked_env,
    shim,
    start_shim,
    torchrun_host_env,
    write_v10_table,
)


@pytest.mark.process
def test_rank_table_initializing_then_completed(tmp_path: Path) -> None:
    table = tmp_path / "table.json"
    write_v10_table(table, servers=1, devices=2, status="initializing")
    out = tmp_path / "out"
    out.mkdir()

    def complete_later() -> None:
        time.sleep(1.5)
        write_v10_table(tmp_path / "next.json", servers=1, devices=2)
        os.replace(tmp_path / "next.json", table)  # atomic, as a ConfigMap update is

    writer = threading.Thread(target=complete_later)
    writer.start()
    env = marked_env({"RANK_TABLE_FILE": str(table), "MALAUNCH_RANK_TABLE_TIMEOUT": "60"})
    done = shim([str(SCRIPTS / "dump_env.py"), str(out)], env, tmp_path)
    writer.join()
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["rank-0.json", "rank-1.json"]
    assert_nothing_left(env[MARK])


def test_rank_table_that_never_completes_exits_3_with_a_clear_timeout(tmp_path: Path) -> None:
    table = tmp_path / "table.json"
    write_v10_table(table, servers=1, devices=2, status="initializing")
    (tmp_path / "train.py").write_text("")
    env = marked_env({"RANK_TABLE_FILE": str(table), "MALAUNCH_RANK_TABLE_TIMEOUT": "1"})
    done = shim(["train.py"], env, tmp_path, timeout=60)
    assert done.returncode == 3, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ma-entrypoint: error: gave up waiting for rank table")
    assert "completed" in last and "Traceback" not in done.stderr


def test_master_name_that_never_resolves_exits_3(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    env = marked_env(
        {"MA_RUN_METHOD": "torchrun", "MA_NUM_HOSTS": "2", "VC_WORKER_HOSTS": "w0.malaunch-test.invalid,w1.invalid",
         "MALAUNCH_MASTER_WAIT": "1"}
    )  # fmt: skip
    done = shim(["train.py"], env, tmp_path, timeout=60)
    assert done.returncode == 3, done.stderr
    assert "w0.malaunch-test.invalid" in done.stderr and "MALAUNCH_MASTER_WAIT" in done.stderr
    assert "Traceback" not in done.stderr


def test_unwritable_log_directory_exits_3_before_anything_starts(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where the log directory should be")
    (tmp_path / "train.py").write_text(f"open({str(tmp_path / 'started')!r}, 'w').close()\n")
    env = marked_env({"MALAUNCH_LOG_DIR": str(tmp_path / "blocker" / "logs")})
    done = shim(["train.py"], env, tmp_path, timeout=60)
    assert done.returncode == 3, done.stderr
    assert str(tmp_path / "blocker" / "logs") in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "started").exists()


@pytest.mark.process
@pytest.mark.torch
def test_torchrun_host_that_starts_20s_late_still_joins(tmp_path: Path) -> None:
    port, coordinator = free_port(), free_port()
    out = tmp_path / "out"
    out.mkdir()
    procs, marks = [], []
    for index in range(2):
        if index == 1:
            time.sleep(20)
        env = torchrun_host_env(index, gpus=1, port=port, job=f"late-{port}", log_dir=tmp_path / f"host{index}",
                                coordinator=coordinator)
        marks.append(env[MARK])
        procs.append(start_shim([str(SCRIPTS / "torch_allreduce.py"), "--out", str(out)], env, tmp_path))
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
    assert [json.loads((out / f"rank-{r}.json").read_text())["value"] for r in range(2)] == [3.0, 3.0]
    for mark in marks:
        assert_nothing_left(mark)
