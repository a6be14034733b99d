"""Real local sweeps through the real ``ma-submit``: a grid followed to its results table with ``max_parallel``
honoured (checked from the start and end times the trials write themselves), a random sweep with a failing
trial, ``--dry-run``, and a detached sweep managed and stopped from other processes (another shell)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from malaunch.entrypoint.run.procs import proctree
from malaunch.sdk.sweep import attach_sweep
from malaunch.sdk.sweep.run import DRIVER_VARIABLE
from sdkutil import CLI_TIMEOUT, REPO, VENV_BIN, assert_nothing_running, job_ids, ma_submit, wait_for, write_job

pytestmark = pytest.mark.process

# The trial writes its own start and end times (and its parameters) to $SWEEP_OUT/trial-<index>.json.
TRIAL = """
    import json, os, sys, time
    start = time.time()
    index = os.environ["MALAUNCH_TRIAL_INDEX"]
    lr, batch, code = sys.argv[2], sys.argv[4], int(os.environ.get("FAIL_CODE", "0"))
    time.sleep(float(os.environ.get("TRIAL_SECONDS", "0.8")))
    print(f"step 1 loss={float(lr) * 1000 / int(batch) + 1:.4f}", flush=True)
    print(f"step 2 loss={float(lr) * 1000 / int(batch):.4f}", flush=True)
    params = {k: v for k, v in os.environ.items() if k.startswith("MALAUNCH_PARAM_")}
    record = {"start": start, "end": time.time(), "argv": sys.argv[1:], "params": params}
    with open(os.path.join(os.environ["SWEEP_OUT"], f"trial-{index}.json"), "w") as handle:
        json.dump(record, handle)
    if code:
        print(f"giving up with {code}", flush=True)
    sys.exit(code)
"""


def sweep_job(folder: Path, out: Path, sweep: Dict[str, Any], **fields: Any) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    env = {"SWEEP_OUT": str(out), **fields.pop("env", {})}
    return write_job(
        folder, TRIAL, name="tiny", args=["--lr", "{lr}", "--batch", "{batch}"], env=env, sweep=sweep, **fields
    )


def intervals(out: Path) -> Dict[int, Tuple[float, float]]:
    found = {}
    for path in out.glob("trial-*.json"):
        data = json.loads(path.read_text())
        found[int(path.stem.split("-")[1])] = (data["start"], data["end"])
    return found


def most_at_once(spans: List[Tuple[float, float]]) -> int:
    """The largest number of trials whose own [start, end) overlap at one moment."""
    return max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)


def test_grid_sweep_runs_at_most_max_parallel_and_ranks_by_the_metric(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, cleanup_jobs: None
) -> None:
    out = tmp_path / "out"
    sweep = {
        "params": {"lr": [0.001, 0.0003], "batch": [32, 64, 128]},
        "max_parallel": 2,
        "metric": {"name": "loss", "regex": r"loss=([0-9.]+)", "goal": "minimize"},
    }
    job = sweep_job(tmp_path / "job", out, sweep)
    result = ma_submit(["sweep", str(job)], cli_env)
    assert result.returncode == 0, result.stderr
    spans = intervals(out)
    assert sorted(spans) == [0, 1, 2, 3, 4, 5]
    assert most_at_once(list(spans.values())) <= 2
    # the table: header, then best first (loss = lr * 1000 / batch; the grid goes batch-major, the file's order)
    lines = result.stdout.splitlines()
    assert lines[0].startswith("sweep tiny-sweep-") and "6 SUCCEEDED" in lines[0]
    header = lines[1].split()
    assert header[:7] == ["TRIAL", "BATCH", "LR", "STATE", "EXIT", "DURATION", "LOSS"]  # the file's order
    rows = [line.split() for line in lines[2:]]
    assert [row[0] for row in rows] == ["5", "3", "4", "1", "2", "0"]
    assert rows[0][1:5] == ["128", "0.0003", "SUCCEEDED", "0"]
    assert rows[0][6] == "0.0023"  # the last match of the regex, not the first (1.0023)
    # every trial got its values through {lr}/{batch} and as variables
    first = json.loads((out / "trial-5.json").read_text())
    assert first["argv"] == ["--lr", "0.0003", "--batch", "128"]
    assert first["params"] == {"MALAUNCH_PARAM_LR": "0.0003", "MALAUNCH_PARAM_BATCH": "128"}
    sweep_id = lines[0].split()[1]
    status = ma_submit(["sweep", "status", "--output", "json", sweep_id[:16]], cli_env)
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["id"] == sweep_id and [t["index"] for t in data["trials"]] == [5, 3, 4, 1, 2, 0]
    assert {t["state"] for t in data["trials"]} == {"SUCCEEDED"} and len(set(t["job_id"] for t in data["trials"])) == 6
    assert len(job_ids(home)) == 6  # each trial is a normal job
    one = data["trials"][0]["job_id"]
    assert ma_submit(["status", one], cli_env).returncode == 0
    logs = ma_submit(["sweep", "logs", "--trial", "5", sweep_id], cli_env)
    assert "[trial 5 host 0 rank 0] step 2 loss=0.0023" in logs.stdout.splitlines()
    listed = ma_submit(["sweep", "list", "--output", "json"], cli_env)
    assert [item["id"] for item in json.loads(listed.stdout)] == [sweep_id]


def test_random_sweep_with_a_failing_trial_keeps_going_and_wait_exits_with_its_code(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, cleanup_jobs: None
) -> None:
    out = tmp_path / "out"
    sweep = {
        "params": {"lr": {"log_uniform": [1e-4, 1e-2]}, "batch": {"choice": [16, 32]}, "code": [0, 5]},
        "random": 4,
        "seed": 7,
        "max_parallel": 1,
    }
    job = sweep_job(tmp_path / "job", out, sweep, env={"FAIL_CODE": "{code}", "TRIAL_SECONDS": "0.2"})
    dry = ma_submit(["sweep", "--dry-run", "--output", "json", str(job)], cli_env)
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)["trials"]
    assert job_ids(home) == []  # the dry run started nothing
    codes = [int(t["params"]["code"]) for t in planned]
    assert 5 in codes and 0 in codes, codes  # seed 7 gives both kinds
    for trial in planned:
        assert 1e-4 <= trial["params"]["lr"] <= 1e-2 and trial["params"]["batch"] in (16, 32)
    detached = ma_submit(["sweep", "--detach", str(job)], cli_env)
    assert detached.returncode == 0, detached.stderr
    sweep_id = detached.stdout.strip()
    followed = ma_submit(["sweep", "logs", "-f", sweep_id], cli_env)  # from the first trial until the last ends
    assert followed.returncode == 0, followed.stderr
    for index in range(4):
        assert sum(1 for line in followed.stdout.splitlines() if line.startswith(f"[trial {index} host 0")) >= 2
        assert f"[trial {index} host 0 rank 0] step 2 loss=" in followed.stdout
    waited = ma_submit(["sweep", "wait", sweep_id], cli_env)
    assert waited.returncode == 5, waited.stderr  # the first failed trial's exit code
    # the same trials as the dry run (seeded), each run to its end: a failure did not stop the others
    spans = intervals(out)
    assert sorted(spans) == [0, 1, 2, 3]
    assert most_at_once(list(spans.values())) == 1
    data = json.loads(ma_submit(["sweep", "status", "--output", "json", sweep_id], cli_env).stdout)
    by_index = {t["index"]: t for t in data["trials"]}
    for index, code in enumerate(codes):
        trial = by_index[index]
        assert trial["params"] == planned[index]["params"]
        assert (trial["state"], trial["exit_code"]) == (("FAILED", 5) if code else ("SUCCEEDED", 0))
        if code:
            assert trial["failure_class"] == "user_error"
    table = ma_submit(["sweep", "status", sweep_id], cli_env).stdout
    assert "FAILED" in table and "user_error" in table


def test_detached_sweep_is_stopped_from_another_process(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, cleanup_jobs: None
) -> None:
    out = tmp_path / "out"
    sweep = {"params": {"lr": [0.1, 0.2, 0.3], "batch": [8]}, "max_parallel": 1}
    job = sweep_job(tmp_path / "job", out, sweep, env={"TRIAL_SECONDS": "600"})
    proc = subprocess.Popen(
        [os.path.join(VENV_BIN, "ma-submit"), "sweep", str(job)],
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(REPO),
    )
    wait_for(lambda: len(job_ids(home)) == 1, timeout=CLI_TIMEOUT, what="the first trial")
    (sweep_id,) = os.listdir(home / "sweeps")
    handle = attach_sweep(sweep_id, home=str(home))
    wait_for(lambda: handle.trials[0].state == "RUNNING", timeout=CLI_TIMEOUT, what="trial 0 running")
    proc.send_signal(signal.SIGINT)  # Ctrl-C while following: the sweep goes on
    _, err = proc.communicate(timeout=CLI_TIMEOUT)
    assert proc.returncode == 130, err
    assert f"sweep {sweep_id} keeps running" in err and f"'ma-submit sweep stop {sweep_id}'" in err
    assert "Traceback" not in err
    assert handle.trials[0].state == "RUNNING"
    stopped = ma_submit(["sweep", "stop", sweep_id], cli_env)
    assert stopped.returncode == 0, stopped.stderr
    rows = {t.index: t for t in handle.trials}
    assert rows[0].state == "STOPPED"
    assert rows[1].state == rows[2].state == "SKIPPED"
    assert len(job_ids(home)) == 1  # nothing more was started
    for job_id in job_ids(home):
        assert_nothing_running(job_id)
    driver = lambda: proctree.pids_with_env(DRIVER_VARIABLE, sweep_id)  # noqa: E731
    wait_for(lambda: not driver(), timeout=CLI_TIMEOUT, what="the sweep's driver to end")
    again = ma_submit(["sweep", "stop", sweep_id], cli_env)  # idempotent
    assert again.returncode == 0, again.stderr
    assert ma_submit(["sweep", "wait", sweep_id], cli_env).returncode == 143
    assert ma_submit(["sweep", "status", "nope"], cli_env).returncode == 4


def test_stop_on_failure_skips_the_waiting_trials(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, cleanup_jobs: None
) -> None:
    out = tmp_path / "out"
    sweep = {"params": {"lr": [0.1], "batch": [8], "code": [4, 0, 0]}, "max_parallel": 1, "stop_on_failure": True}
    job = sweep_job(tmp_path / "job", out, sweep, env={"FAIL_CODE": "{code}", "TRIAL_SECONDS": "0.1"})
    result = ma_submit(["sweep", "--output", "json", str(job)], cli_env)
    assert result.returncode == 4, result.stderr
    trials = {t["index"]: t for t in json.loads(result.stdout)["trials"]}
    assert (trials[0]["state"], trials[0]["exit_code"]) == ("FAILED", 4)
    assert trials[1]["state"] == trials[2]["state"] == "SKIPPED"
    assert "stop_on_failure: trial 0 failed" in trials[1]["message"]
    assert sorted(intervals(out)) == [0] and len(job_ids(home)) == 1
