"""Job directory helpers with real processes: finding a job's processes by environment, killing them, atomic
state writes, and the network-namespace host network (root only)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from malaunch.sdk.backends.local.hostnet import LoopbackNetwork, NetnsNetwork
from malaunch.sdk.backends.local.jobdir import job_processes, kill_processes, pid_alive, read_json
from malaunch.sdk.home import write_json_atomic

STUBBORN = (
    "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('up', flush=True)\ntime.sleep(600)\n"
)


def start(job_id: str, code: str) -> subprocess.Popen[str]:
    env = dict(os.environ, MALAUNCH_JOB_ID=job_id)
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "up\n"
    return proc


@pytest.mark.process
def test_job_processes_found_by_environment_and_killed() -> None:
    job_id = f"t-{uuid.uuid4().hex}"
    polite = start(job_id, "import time\nprint('up', flush=True)\ntime.sleep(600)\n")
    stubborn = start(job_id, STUBBORN)
    other = start(f"other-{uuid.uuid4().hex}", "import time\nprint('up', flush=True)\ntime.sleep(600)\n")
    try:
        assert job_processes(job_id) == sorted([polite.pid, stubborn.pid])

        def reap() -> None:
            polite.poll()
            stubborn.poll()

        assert kill_processes(lambda: job_processes(job_id), grace=0.5, reap=reap) == []
        assert polite.wait(timeout=10) == -signal.SIGTERM
        assert stubborn.wait(timeout=10) == -signal.SIGKILL
        assert job_processes(job_id) == [] and pid_alive(other.pid)
    finally:
        for proc in (polite, stubborn, other):
            proc.kill()
            proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()
    assert not pid_alive(other.pid)


def test_zombies_are_not_alive() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    assert not pid_alive(proc.pid)
    proc.wait()
    assert not pid_alive(None) and not pid_alive(-1) and pid_alive(os.getpid())


def test_atomic_json_write(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    write_json_atomic(str(path), {"state": "RUNNING"})
    write_json_atomic(str(path), {"state": "SUCCEEDED"})
    assert read_json(str(path)) == {"state": "SUCCEEDED"}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
    (tmp_path / "bad.json").write_text("[1, 2")
    assert read_json(str(tmp_path / "bad.json")) is None
    (tmp_path / "list.json").write_text(json.dumps([1]))
    assert read_json(str(tmp_path / "list.json")) is None


def test_loopback_addresses_are_distinct_and_local() -> None:
    addresses = LoopbackNetwork("j", 300).addresses()
    assert addresses[:3] == ("127.0.0.1", "127.0.0.2", "127.0.0.3")
    assert len(set(addresses)) == 300 and all(a.startswith("127.") for a in addresses)


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2")
def test_netns_setup_connects_hosts_and_teardown_removes_everything() -> None:
    net = NetnsNetwork(f"netns-test-{uuid.uuid4().hex[:8]}", 2)
    try:
        net.setup()
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
        assert all(ns in listed for ns in net.namespaces())
        ping = subprocess.run(
            [
                *net.wrap(
                    1, ["python3", "-c", f"import socket; socket.create_connection(('{net.addresses()[0]}', 9), 2)"]
                )
            ],
            capture_output=True,
            text=True,
        )
        # Port 9 is closed: "connection refused" proves the peer address answered across the bridge.
        assert "ConnectionRefusedError" in ping.stderr, ping.stderr
    finally:
        net.teardown()
        net.teardown()  # idempotent
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert not any(ns in listed for ns in net.namespaces())
