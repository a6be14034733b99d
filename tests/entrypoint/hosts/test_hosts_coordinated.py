"""Issue 25: the hosts of a job coordinate themselves, as in a cluster (shims started as a pod starts them).

Every test starts one real shim per emulated host (``python -m malaunch.entrypoint``, the platform's variables,
no SDK runner); host 0's shim serves the job's coordinator. The faults are those a cluster sees: a rank killed,
a host SIGKILLed or frozen, a host back, the master lost, a stranger on the coordinator's port.
"""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

import pytest
from hostsutil import Hosts, job_causes, lines

RESTARTS = {"MA_MAX_RESTARTS": "3", "MALAUNCH_RESTART_ON": "always"}


def _job(made: list[Hosts], tmp: Path, count: int, plan: str, **extra: str) -> Hosts:
    job = Hosts(tmp, count, {"HOSTS_JOB_PLAN": plan, **extra})
    made.append(job)
    return job


def test_a_rank_killed_while_its_peer_computes_restarts_every_host_and_the_job_succeeds(
    hosts: list[Hosts], tmp_path: Path
) -> None:
    job = _job(hosts, tmp_path, 2, "0:0=sleep,0:1=kill", **RESTARTS).start_all()
    assert [job.wait(0), job.wait(1)] == [0, 0]
    for index in (0, 1):
        report = job.report(index)
        assert [a["attempt"] for a in report["attempts"]] == [0, 1]
        cause = job_causes(report)[0]
        assert cause is not None and (cause["host"], cause["code"], cause["kind"]) == (1, 137, "signal")
        assert report["attempts"][0]["restarted"] is True
        assert "every host starts attempt 1" in job.console(index)
    # host 0 never waited out its 600 s computation: the coordinator ended its attempt 0
    assert job.report(0)["attempts"][0]["root_cause"]["name"] == "another host"
    assert (tmp_path / "started-h0-a1").exists() and (tmp_path / "started-h1-a1").exists()


def test_three_hosts_share_one_restart_budget(hosts: list[Hosts], tmp_path: Path) -> None:
    job = _job(hosts, tmp_path, 3, "0:2=kill,1:1=exit7,0:0=sleep,1:0=sleep,2:0=sleep",
               MA_MAX_RESTARTS="1", MALAUNCH_RESTART_ON="always").start_all()  # fmt: skip
    assert [job.wait(i) for i in range(3)] == [7, 7, 7]  # attempt 1 failed and the job's one restart was spent
    for index in range(3):
        report = job.report(index)
        assert [a["attempt"] for a in report["attempts"]] == [0, 1]
        assert [(c or {}).get("host") for c in job_causes(report)] == [2, 1]
        assert report["root_cause"]["exit_code"] == 7 and report["failure_class"]["class"] == "user_error"


def test_the_same_attempt_number_reaches_every_rank(hosts: list[Hosts], tmp_path: Path) -> None:
    job = _job(hosts, tmp_path, 2, "0:0=kill,0:1=sleep,1:1=kill,1:0=sleep", **RESTARTS).start_all()
    assert [job.wait(0), job.wait(1)] == [0, 0]
    for attempt in (0, 1, 2):
        assert (tmp_path / f"started-h0-a{attempt}").exists() and (tmp_path / f"started-h1-a{attempt}").exists()
    assert "secret seen: False" in (tmp_path / "h0" / "attempt-2" / "boot.log").read_text()


def test_a_host_sigkilled_that_does_not_come_back_ends_the_job_with_75_naming_it(
    hosts: list[Hosts], tmp_path: Path
) -> None:
    job = _job(hosts, tmp_path, 2, "0:0=sleep,0:1=sleep", **RESTARTS).started()
    job.signal_tree(1, signal.SIGKILL)
    assert job.wait(0) == 75
    report = job.report(0)
    assert report["failure_class"]["class"] == "host_lost"
    assert "host 1 (127.0.0.2) lost: its connection closed" in report["root_cause"]["tail"][-1]
    assert "did not come back within 4 s" in report["root_cause"]["tail"][-1]


def test_without_restarts_a_lost_host_ends_the_others_at_once_with_75(hosts: list[Hosts], tmp_path: Path) -> None:
    job = _job(hosts, tmp_path, 2, "0:0=sleep,0:1=sleep", MALAUNCH_HOST_WAIT="600").started()
    job.signal_tree(1, signal.SIGKILL)
    assert job.wait(0, timeout=30) == 75  # no restart is possible: the host wait does not apply
    assert "did not come back" not in job.report(0)["root_cause"]["tail"][-1]


def test_a_frozen_host_is_noticed_by_its_silence(hosts: list[Hosts], tmp_path: Path) -> None:
    job = _job(hosts, tmp_path, 2, "0:0=sleep,0:1=sleep", **RESTARTS).started()
    job.signal_tree(1, signal.SIGSTOP)
    assert job.wait(0) == 75
    line = job.report(0)["root_cause"]["tail"][-1]
    assert "host 1 (127.0.0.2) lost: no heartbeat for 3 s" in line
    job.signal_tree(1, signal.SIGCONT)


def test_a_host_killed_and_started_again_rejoins_and_the_job_succeeds(hosts: list[Hosts], tmp_path: Path) -> None:
    job = _job(hosts, tmp_path, 2, "0:0=sleep,0:1=sleep", **RESTARTS, MALAUNCH_HOST_WAIT="60").started()
    job.signal_tree(1, signal.SIGKILL)
    job.wait(1)
    time.sleep(1.0)  # the platform takes a moment to replace the pod
    job.start(1)
    assert [job.wait(0), job.wait(1)] == [0, 0]
    assert (tmp_path / "started-h1-a1").exists()  # the new shim joined the next attempt, not an old one
    assert job_causes(job.report(0))[0]["kind"] == "host_lost"
    assert [a["attempt"] for a in job.report(1)["attempts"]] == [1]


def test_the_master_lost_ends_the_others_cleanly_with_75(hosts: list[Hosts], tmp_path: Path) -> None:
    job = _job(hosts, tmp_path, 2, "0:0=sleep,0:1=sleep", **RESTARTS).started()
    job.signal_tree(0, signal.SIGKILL)
    assert job.wait(1) == 75
    report = job.report(1)
    assert report["failure_class"]["class"] == "host_lost"
    assert "host 0 (127.0.0.1) lost" in report["root_cause"]["tail"][-1]
    assert lines(job.console(1), "lost the job's coordinator")


def test_the_master_back_in_time_lets_the_job_go_on(hosts: list[Hosts], tmp_path: Path) -> None:
    job = _job(hosts, tmp_path, 2, "0:0=sleep,0:1=sleep", **RESTARTS, MALAUNCH_HOST_WAIT="60").started()
    job.signal_tree(0, signal.SIGKILL)
    job.wait(0)
    time.sleep(1.0)
    job.start(0)
    assert [job.wait(0), job.wait(1)] == [0, 0]
    assert (tmp_path / "started-h0-a1").exists() and (tmp_path / "started-h1-a1").exists()


def _stranger(port: int, payload: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.recv(4096)  # the challenge
        sock.settimeout(2)
        try:  # the coordinator closes the connection (a reset when it closed with bytes unread)
            sock.sendall(payload)
            while sock.recv(4096):
                pass
        except OSError:
            pass


def test_strangers_on_the_coordinator_port_are_refused_and_the_job_is_unharmed(
    hosts: list[Hosts], tmp_path: Path
) -> None:
    from malaunch.entrypoint.run.hosts import wire

    job = _job(hosts, tmp_path, 2, "0:0=sleep,0:1=exit0", **RESTARTS)
    job.env["HOSTS_JOB_PLAN"] = "0:0=ok,0:1=ok"
    job.start(0)
    job.wait_listening()
    _stranger(job.port, b"\x00\xff garbage \n" * 3)
    _stranger(job.port, b"x" * 10000)  # an oversized line
    # a well-formed message proved with the job's name, not its secret: "host 1 failed"
    with socket.create_connection(("127.0.0.1", job.port), timeout=5) as sock:
        nonce = wire.read_challenge(sock.recv(4096))
        forged = wire.Channel(wire.job_key("coord-job"), nonce, "c")
        sock.sendall(forged.seal({"t": "hello", "host": 1, "addr": "127.0.0.2", "last": -1}))
        sock.settimeout(3)
        try:  # refused: closed (a reset when the coordinator closed with the second line unread)
            sock.sendall(forged.seal({"t": "over", "attempt": 0, "cause": {"code": 1, "kind": "user_error"}}))
            assert sock.recv(4096) == b""
        except (ConnectionResetError, BrokenPipeError):
            pass
    flood = [socket.create_connection(("127.0.0.1", job.port), timeout=5) for _ in range(80)]
    time.sleep(0.5)
    for sock in flood:
        sock.close()
    job.start(1)
    assert [job.wait(0), job.wait(1)] == [0, 0]
    console = job.console(0)
    assert lines(console, "refused a connection from 127.0.0.1: bad_mac: the proof does not match")
    assert lines(console, "refused a connection from 127.0.0.1: malformed")
    assert lines(console, "refused a connection from 127.0.0.1: a line over 4096 bytes")
    assert lines(console, "refused a connection from 127.0.0.1: more than 68 connections")
    assert len(lines(console, "bad_mac")) == 1 and job.secret not in console


def _method_env(method: str, tmp: Path) -> dict[str, str]:
    from shimutil import free_port, write_v10_table

    port = str(free_port())
    if method == "ranktable":
        write_v10_table(tmp / "table.json", servers=2, devices=1)
        table = str(tmp / "table.json")
        return {"MA_RUN_METHOD": "ranktable", "RANK_TABLE_FILE": table, "MALAUNCH_MASTER_PORT": port}
    if method == "torchrun":
        return {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "1", "MA_TORCHRUN_MASTER_PORT": port}
    return {"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": "1", "MA_MSRUN_MASTER_PORT": port,
            "MSRUN_CLUSTER_TIME_OUT": "120", "HOSTS_METHOD": "msrun"}  # fmt: skip


@pytest.mark.process
@pytest.mark.parametrize(
    "method",
    [
        "ranktable",
        pytest.param("torchrun", marks=pytest.mark.torch),
        pytest.param("msrun", marks=[pytest.mark.mindspore, pytest.mark.netns]),
    ],
)
def test_every_method_restarts_on_every_host_when_a_rank_dies_outside_any_collective(
    hosts: list[Hosts], tmp_path: Path, method: str
) -> None:
    job = Hosts(tmp_path, 2, {**RESTARTS, **_method_env(method, tmp_path), "MALAUNCH_GRACE_PERIOD": "5"},
                script="hosts_methods.py", netns=method == "msrun")  # fmt: skip
    hosts.append(job)
    job.start_all()
    assert [job.wait(0, timeout=300), job.wait(1, timeout=300)] == [0, 0], job.console(0)[-3000:] + job.console(1)
    for index in (0, 1):
        report = job.report(index)
        assert [a["attempt"] for a in report["attempts"]] == [0, 1]
        assert job_causes(report)[0]["host"] == 1 and job_causes(report)[0]["kind"] == "signal"
    assert "sum 2" in job.console(0) + "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*.log"))
