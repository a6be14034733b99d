"""``ma-submit`` the way torchrun and kubectl users type it, with the real console script and real jobs:
script arguments after ``--``, overrides, dry-run checks and masking, did-you-mean, logs by time with filters,
id prefixes, the list table, JSON errors, delete/prune, and ModelArts launcher variables in ``env``."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Dict

import pytest
from malaunch.sdk.backends.local.state import read_state
from malaunch.sdk.cli.jobs import format_age, parse_duration
from malaunch.sdk.logview import LogQuery, line_rank, select_lines
from malaunch.sdk.redact import MASK, mask_data, mask_env
from sdkutil import assert_nothing_running, copy_job, job_ids, ma_submit, wait_for, write_job

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("cleanup_jobs")]

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"

ARGV = """
    import os, sys
    print("argv", sys.argv[1:], flush=True)
    print("GREETING", os.environ.get("GREETING"), "hosts", os.environ["MA_NUM_HOSTS"], flush=True)
"""

ORDERED = """
    import os, time
    rank = int(os.environ["RANK_ID"])
    sync = os.environ["SYNC_DIR"]

    def wait_for(name):
        while not os.path.exists(os.path.join(sync, name)):
            time.sleep(0.02)
        time.sleep(0.3)

    def mark(name):
        open(os.path.join(sync, name), "w").close()

    if rank == 0:
        print("A", flush=True); mark("a"); wait_for("b"); print("C", flush=True); mark("c")
    else:
        wait_for("a"); print("B", flush=True); mark("b"); wait_for("c"); print("D", flush=True)
"""


def test_script_arguments_after_dash_dash_and_overrides_reach_the_script(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    job = write_job(tmp_path / "argv", ARGV, name="argv", args=["--lr", 0.1])
    result = ma_submit(
        ["--env", "GREETING=hi there", "--hosts", "2", "--devices-per-host", "1", "--name", "renamed",
         str(job), "--", "--epochs", "2"], cli_env,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[host 1 rank 1] argv ['--lr', '0.1', '--epochs', '2']" in result.stdout
    assert "GREETING hi there hosts 2" in result.stdout
    (job_id,) = job_ids(home)
    assert job_id.startswith("renamed-")
    assert_nothing_running(job_id)


def test_dry_run_checks_the_boot_file_and_masks_secrets(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    env = {"AWS_SECRET_ACCESS_KEY": SECRET, "HF_TOKEN": SECRET, "DB_PASSWORD": SECRET, "OMP_NUM_THREADS": "1"}
    job = write_job(tmp_path / "dry", ARGV, name="dry", env=env)
    for output in ("text", "json"):
        result = ma_submit(["--dry-run", "--output", output, "--env", f"MY_API_KEY={SECRET}", str(job)], cli_env)
        assert result.returncode == 0, result.stderr
        assert SECRET not in result.stdout + result.stderr
        assert "OMP_NUM_THREADS" in result.stdout
    text = ma_submit(["--dry-run", str(job)], cli_env).stdout
    assert f"AWS_SECRET_ACCESS_KEY={MASK}" in text and f"MY_API_KEY={MASK}" not in text  # not given this time
    data = json.loads(ma_submit(["--dry-run", "--output", "json", str(job)], cli_env).stdout)
    assert data["spec"]["env"]["AWS_SECRET_ACCESS_KEY"] == MASK
    assert data["request"]["hosts"][0]["env"]["HF_TOKEN"] == MASK
    (tmp_path / "dry" / "boot.py").unlink()
    missing = ma_submit(["--dry-run", str(job)], cli_env)
    assert missing.returncode == 2 and "boot_file" in missing.stderr and SECRET not in missing.stdout
    shutil.rmtree(tmp_path / "dry")
    (tmp_path / "dry").mkdir()
    (tmp_path / "dry" / "job.yaml").write_text(json.dumps({"name": "dry", "code_dir": "gone", "boot_file": "b.py"}))
    gone = ma_submit(["--dry-run", str(tmp_path / "dry" / "job.yaml")], cli_env)
    assert gone.returncode == 2 and "code_dir: is not an existing folder" in gone.stderr
    assert not (home / "jobs").exists()


def test_did_you_mean_for_verbs(cli_env: Dict[str, str]) -> None:
    result = ma_submit(["stauts", "x"], cli_env)
    assert result.returncode == 2
    assert "did you mean 'status'?" in result.stderr and "Traceback" not in result.stderr
    assert "did you mean 'prune'" in ma_submit(["prnue"], cli_env).stderr
    forgot = ma_submit(["job.yaml", "--epochs", "2"], cli_env)
    assert forgot.returncode == 2 and "script arguments go after '--'" in forgot.stderr


def test_json_errors_on_stdout(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    missing = ma_submit(["--output", "json", str(tmp_path / "nope.yaml")], cli_env)
    assert missing.returncode == 2
    data = json.loads(missing.stdout)
    assert data["exit_code"] == 2 and data["field"] == "job file" and "cannot be read" in data["error"]
    unknown = ma_submit(["status", "--output=json", "no-such-job"], cli_env)
    assert unknown.returncode == 4
    assert json.loads(unknown.stdout) == {"error": json.loads(unknown.stdout)["error"], "field": None, "exit_code": 4}
    job = write_job(tmp_path / "bad", ARGV, name="bad", resources={"hosts": 0})
    bad = json.loads(ma_submit(["--output", "json", str(job)], cli_env).stdout)
    assert bad["field"] == "resources.hosts" and bad["exit_code"] == 2


def test_logs_merged_by_time_with_tail_host_and_rank_filters(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    sync = tmp_path / "sync"
    sync.mkdir()
    job = write_job(tmp_path / "ordered", ORDERED, name="ordered", resources={"hosts": 2, "devices_per_host": 1},
                    env={"SYNC_DIR": str(sync)})  # fmt: skip
    result = ma_submit([str(job)], cli_env)
    assert result.returncode == 0, result.stdout + result.stderr
    (job_id,) = job_ids(home)

    def logs(*args: str) -> list[str]:
        shown = ma_submit(["logs", *args, job_id], cli_env)
        assert shown.returncode == 0, shown.stderr
        return shown.stdout.splitlines()

    ranks = ["[host 0 rank 0] A", "[host 1 rank 1] B", "[host 0 rank 0] C", "[host 1 rank 1] D"]
    assert [line for line in logs() if " rank " in line.split("]")[0]] == ranks  # the shims' own are interleaved too
    assert logs("--rank", "0", "--rank", "1") == ranks
    assert logs("--rank", "0", "--rank", "1", "--tail", "2") == ranks[2:]
    assert logs("--host", "1", "--rank", "1") == [ranks[1], ranks[3]]
    assert logs("--rank", "0", "--tail", "1") == [ranks[2]]
    assert logs("-f", "--rank", "1", "--tail", "1") == [ranks[3]]
    assert all(line.startswith("[host 1 ") for line in logs("--host", "1"))
    prefix = job_id[: len("ordered-") + 4]
    assert logs_of_prefix(prefix, cli_env) == len(logs())
    assert_nothing_running(job_id)


def logs_of_prefix(prefix: str, env: Dict[str, str]) -> int:
    shown = ma_submit(["logs", prefix], env)
    assert shown.returncode == 0, shown.stderr
    return len(shown.stdout.splitlines())


def test_prefixes_list_table_delete_and_prune(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    job = write_job(tmp_path / "quick", ARGV, name="quick")
    assert ma_submit([str(job)], cli_env).returncode == 0
    (job_id,) = job_ids(home)
    state = read_state(str(home / "jobs" / job_id / "state.json")).data
    assert state is not None
    copy_job(home, job_id, "quick-older-1", created_at=state["created_at"] - 7200, ended_at=state["ended_at"] - 7200)
    copy_job(home, job_id, "quick-older-2", created_at=state["created_at"] - 3600)
    listed = ma_submit(["list"], cli_env)
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["JOB", "ID", "STATE", "AGE", "DURATION", "EXIT", "CODE"]
    assert [line.split()[0] for line in lines[1:]] == [job_id, "quick-older-2", "quick-older-1"]
    assert lines[3].split()[1:3] == ["SUCCEEDED", "2h"] and lines[3].split()[-1] == "0"
    ambiguous = ma_submit(["status", "quick-older"], cli_env)
    assert ambiguous.returncode == 2 and "matches 2 jobs" in ambiguous.stderr
    assert "quick-older-2" in ma_submit(["status", "quick-older-2"], cli_env).stdout
    assert ma_submit(["status", "quick-o"], cli_env).returncode == 2
    pruned = ma_submit(["prune", "--older-than", "90m"], cli_env)
    assert pruned.returncode == 0 and pruned.stdout.split() == ["deleted", "quick-older-1"]
    assert ma_submit(["prune", "--older-than", "soon"], cli_env).returncode == 2
    deleted = ma_submit(["delete", "quick-older-2"], cli_env)
    assert deleted.returncode == 0 and not (home / "jobs" / "quick-older-2").exists()
    sleeper = write_job(tmp_path / "sleeper", "import time\nprint('up', flush=True)\ntime.sleep(600)\n", name="sleeper")
    sleeping = ma_submit(["--detach", str(sleeper)], cli_env).stdout.strip()
    wait_for(lambda: "up" in ma_submit(["logs", sleeping], cli_env).stdout, what="the sleeper")
    refused = ma_submit(["delete", sleeping], cli_env)
    assert refused.returncode == 2 and f"ma-submit stop {sleeping}" in refused.stderr
    assert ma_submit(["prune", "--older-than", "0"], cli_env).stdout.split() == ["deleted", job_id]
    assert ma_submit(["stop", sleeping], cli_env).returncode == 0
    assert ma_submit(["delete", sleeping[:10]], cli_env).returncode == 0
    assert job_ids(home) == []


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.torch
def test_env_ma_torchrun_master_port_runs_torchrun_on_that_port(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    port = _free_port()
    script = """
        import os
        print("master port", os.environ["MASTER_PORT"], "rdzv", os.environ.get("TORCHELASTIC_RUN_ID"), flush=True)
    """
    env = {"MA_RUN_METHOD": "torchrun", "MA_TORCHRUN_MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
    job = write_job(tmp_path / "port", script, name="port", resources={"hosts": 2, "devices_per_host": 1}, env=env)
    result = ma_submit([str(job)], cli_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(f"master port {port}") == 2, result.stdout
    (job_id,) = job_ids(home)
    plan = json.loads((home / "jobs" / job_id / "plan.json").read_text())
    assert plan["spec"]["launcher"]["master_port"] == port and "MA_TORCHRUN_MASTER_PORT" not in plan["spec"]["env"]
    clash = write_job(tmp_path / "clash", script, name="clash", env=env, launcher={"master_port": port + 1})
    refused = ma_submit([str(clash)], cli_env)
    assert refused.returncode == 2
    assert "env.MA_TORCHRUN_MASTER_PORT" in refused.stderr and "launcher.master_port" in refused.stderr
    assert_nothing_running(job_id)


def test_small_pieces() -> None:
    assert parse_duration("90") == 90 and parse_duration("30m") == 1800 and parse_duration("7d") == 604800
    with pytest.raises(ValueError):
        parse_duration("7 days")
    assert [format_age(x) for x in (None, 5, 300, 7200, 172800)] == ["-", "5s", "5m", "2h", "2d"]
    assert mask_env({"A_KEY": "x", "PATH": "/bin", "EMPTY_TOKEN": ""}) == {
        "A_KEY": MASK,
        "PATH": "/bin",
        "EMPTY_TOKEN": "",
    }
    assert mask_data({"env": {"password": 3}, "list": [{"Secret": "s"}]}) == {
        "env": {"password": MASK},
        "list": [{"Secret": MASK}],
    }
    assert [line_rank(x) for x in ("[host 0] [rank3]: x", "[host 1 rank 12] y", "[host 0 msrun] [rank 2] z",
                                   "[host 0] plain")] == [3, 12, 2, None]  # fmt: skip
    lines = ["[host 0 rank 0] a", "[host 1 rank 1] b", "[host 0 rank 0] c"]
    assert list(select_lines(lines, LogQuery(hosts=frozenset({0}), tail=1))) == ["[host 0 rank 0] c"]
