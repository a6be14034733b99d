"""Issue 26 §2: elastic torchrun (MALAUNCH_MIN_HOSTS), shims started as a cluster starts them, torch's real
torchrun with gloo on loopback. A host lost for good leaves the others going on with a smaller world; a host
back is taken in by the next attempt; neither costs a restart (MA_MAX_RESTARTS=0 throughout)."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from hostsutil import Hosts
from shimutil import SCRIPTS, free_port, marked_env, shim

pytestmark = [pytest.mark.process, pytest.mark.torch]

WAIT = 300.0


def _job(made: List[Hosts], tmp: Path, min_hosts: int, finish_at: int, count: int = 2, **extra: str) -> Hosts:
    env = {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "1", "MA_TORCHRUN_MASTER_PORT": str(free_port()),
           "MALAUNCH_MIN_HOSTS": str(min_hosts), "MA_MAX_RESTARTS": "0", "ELASTIC_FINISH_AT": str(finish_at),
           "MALAUNCH_GRACE_PERIOD": "5", **extra}  # fmt: skip
    job = Hosts(tmp, count, env, script="elastic_job.py")
    made.append(job)
    return job


def _wait_for(path: Path, what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _worlds(report: Dict[str, Any]) -> List[Any]:
    return [(a["attempt"], a.get("members"), a.get("world_size")) for a in report["attempts"]]


def _said(job: Hosts, index: int, tmp: Path) -> str:
    return job.console(index) + "".join(p.read_text(errors="replace") for p in (tmp / f"h{index}").rglob("*.log"))


def test_a_host_lost_for_good_leaves_the_survivor_going_on_alone_with_world_size_1(
    hosts: List[Hosts], tmp_path: Path
) -> None:
    job = _job(hosts, tmp_path, 1, finish_at=1).start_all()
    _wait_for(tmp_path / "world-h1-a0-w2", "attempt 0 never formed a world of 2")
    job.signal_tree(1, signal.SIGKILL)
    assert job.wait(0, timeout=WAIT) == 0, job.console(0)[-3000:]
    assert (tmp_path / "world-h0-a1-w1").exists()
    assert "WORLD_SIZE=1 rank 0 host 0 attempt 1" in _said(job, 0, tmp_path)
    report = job.report(0)
    assert _worlds(report) == [(0, [0, 1], 2), (1, [0], 1)]
    assert report["exit_code"] == 0 and report["attempts"][0]["restarted"] is True
    [event] = report["hosts"]["membership"]
    assert (event["attempt"], event["left"], event["joined"], event["world_size"]) == (1, [1], [], 1)
    assert event["charged"] is False and report["hosts"]["min_hosts"] == 1
    assert "attempt 1 runs on 1 host(s), world size 1" in job.console(0)


def test_the_host_started_again_is_taken_in_and_the_world_is_2_again(hosts: List[Hosts], tmp_path: Path) -> None:
    job = _job(hosts, tmp_path, 1, finish_at=2).start_all()
    _wait_for(tmp_path / "world-h1-a0-w2", "attempt 0 never formed a world of 2")
    job.signal_tree(1, signal.SIGKILL)
    job.wait(1)
    _wait_for(tmp_path / "world-h0-a1-w1", "host 0 never went on alone")
    job.start(1)  # the platform replaced the pod
    assert [job.wait(0, timeout=WAIT), job.wait(1, timeout=WAIT)] == [0, 0], job.console(0)[-3000:]
    assert (tmp_path / "world-h0-a2-w2").exists() and (tmp_path / "world-h1-a2-w2").exists()
    assert "WORLD_SIZE=2" in _said(job, 1, tmp_path)
    report = job.report(0)
    assert _worlds(report) == [(0, [0, 1], 2), (1, [0], 1), (2, [0, 1], 2)]
    events = report["hosts"]["membership"]
    assert [(e["attempt"], e["left"], e["joined"], e["charged"]) for e in events] == [(1, [1], [], False),
                                                                                       (2, [], [1], False)]
    assert _worlds(job.report(1)) == [(2, [0, 1], 2)]


def test_three_hosts_lose_the_middle_one_and_two_go_on_with_their_ranks_renumbered(
    hosts: List[Hosts], tmp_path: Path
) -> None:
    job = _job(hosts, tmp_path, 2, finish_at=1, count=3).start_all()
    _wait_for(tmp_path / "world-h2-a0-w3", "attempt 0 never formed a world of 3")
    job.signal_tree(1, signal.SIGKILL)
    assert [job.wait(0, timeout=WAIT), job.wait(2, timeout=WAIT)] == [0, 0], job.console(0)[-3000:]
    assert (tmp_path / "world-h0-a1-w2").exists() and (tmp_path / "world-h2-a1-w2").exists()
    said = _said(job, 0, tmp_path) + _said(job, 2, tmp_path)
    seen = {tuple(line.split("WORLD_SIZE=2 rank ")[1].split()[:3:2]) for line in said.splitlines()
            if "WORLD_SIZE=2 rank" in line}  # (rank, host), from the console and the logs alike
    assert sorted(rank for rank, _ in seen) == ["0", "1"], said[-3000:]  # ranks 0 and 1 of 2: numbered again
    assert sorted(host for _, host in seen) == ["0", "2"]
    for index in (0, 2):  # issue 43 §7: the console prefix and the rank log name the rank the script sees
        [line] = [line for line in job.console(index).splitlines() if "WORLD_SIZE=2 rank" in line]
        rank = line.split("WORLD_SIZE=2 rank ")[1].split()[0]
        assert line.startswith(f"[rank {rank}] WORLD_SIZE=2 rank {rank} host {index} attempt 1"), line
        [log] = [p for p in (tmp_path / f"h{index}").rglob("rank-*.log") if "WORLD_SIZE=2" in p.read_text()]
        assert log.name == f"rank-{rank}.log" and log.parent.name == "attempt-1", log
    for index in (0, 2):
        assert _worlds(job.report(index)) == [(0, [0, 1, 2], 3), (1, [0, 2], 2)]


def test_fewer_hosts_than_min_hosts_end_the_job_with_75(hosts: List[Hosts], tmp_path: Path) -> None:
    job = _job(hosts, tmp_path, 2, finish_at=1).start_all()
    _wait_for(tmp_path / "world-h1-a0-w2", "attempt 0 never formed a world of 2")
    job.signal_tree(1, signal.SIGKILL)
    assert job.wait(0, timeout=WAIT) == 75
    report = job.report(0)
    assert report["failure_class"]["class"] == "host_lost"
    assert "did not come back within 4 s" in report["root_cause"]["tail"][-1]
    assert [a["attempt"] for a in report["attempts"]] == [0]


@pytest.mark.parametrize("method", ["msrun", "ranktable", ""])
def test_min_hosts_with_another_method_exits_2_with_one_line(tmp_path: Path, method: str) -> None:
    env = marked_env({"MA_RUN_METHOD": method, "MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "0",
                      "VC_WORKER_HOSTS": "127.0.0.1,127.0.0.2", "MALAUNCH_MIN_HOSTS": "1"})  # fmt: skip
    done = shim([str(SCRIPTS / "elastic_job.py")], env, tmp_path, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert "MALAUNCH_MIN_HOSTS='1' is invalid: elastic hosts work with MA_RUN_METHOD=torchrun only" in lines[0]
    assert "unset MALAUNCH_MIN_HOSTS" in lines[0]


@pytest.mark.parametrize(("value", "expected"), [("3", "at most MA_NUM_HOSTS=2"), ("0", "between 1 and 16384")])
def test_min_hosts_out_of_bounds_exits_2(tmp_path: Path, value: str, expected: str) -> None:
    env = marked_env({"MA_RUN_METHOD": "torchrun", "MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "0",
                      "VC_WORKER_HOSTS": "127.0.0.1,127.0.0.2", "MALAUNCH_MIN_HOSTS": value})  # fmt: skip
    done = shim(["--dry-run", str(SCRIPTS / "elastic_job.py")], env, tmp_path, timeout=60)
    assert done.returncode == 2 and expected in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_min_hosts_without_the_coordinator_exits_2(tmp_path: Path) -> None:
    env = marked_env({"MA_RUN_METHOD": "torchrun", "MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "1",
                      "VC_WORKER_HOSTS": "127.0.0.1,127.0.0.2", "MALAUNCH_MIN_HOSTS": "1",
                      "MALAUNCH_COORDINATOR": "False", "MALAUNCH_LOG_DIR": str(tmp_path / "logs")})  # fmt: skip
    done = shim([str(SCRIPTS / "elastic_job.py")], env, tmp_path, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "MALAUNCH_MIN_HOSTS='1' is invalid: elastic hosts need the hosts' coordinator" in done.stderr


def test_dry_run_shows_the_elastic_argv(tmp_path: Path) -> None:
    env = marked_env({"MA_RUN_METHOD": "torchrun", "MA_NUM_HOSTS": "3", "VC_TASK_INDEX": "1", "MA_NUM_GPUS": "2",
                      "VC_WORKER_HOSTS": "10.0.0.1,10.0.0.2,10.0.0.3", "MALAUNCH_MIN_HOSTS": "2",
                      "MA_VJ_NAME": "job7", "MA_TORCHRUN_MASTER_PORT": "23456"})  # fmt: skip
    done = shim(["--dry-run", str(SCRIPTS / "elastic_job.py")], env, tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    for flag in ("--nnodes=2:3", "--nproc_per_node=2", "--rdzv_backend=c10d", "--rdzv_endpoint=10.0.0.1:23456",
                 "--rdzv_id=job7", "--max_restarts=0", "is_host=0", "last_call_timeout=1"):
        assert flag in done.stdout, (flag, done.stdout)
    assert "--node_rank" not in done.stdout and "--rdzv_backend=static" not in done.stdout
