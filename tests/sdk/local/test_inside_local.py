"""Inside a local job, for real: ``ma-submit events|top|exec`` and ``handle.events/usage/exec`` on jobs run by the
real runner and shim, the pending reason of a host whose shim waits for its rank table, and the one-line
errors for an unknown, a waiting and an ended job."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
from malaunch.sdk import Job, JobState
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.backends.local.inside import pending_reason
from malaunch.sdk.backends.local.jobdir import job_processes
from malaunch.sdk.errors import ConfigError, JobNotFound, JobNotRunning
from malaunch.sdk.status import HostState, HostStatus, JobStatus
from sdkutil import VENV_BIN, assert_nothing_running, ma_submit, wait_for, write_job

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("cleanup_jobs")]

HOLDER = """
    import os, sys, time
    ballast = b"x" * (40 << 20)  # resident: top must see it
    print(f"ready on {os.environ['MA_CURRENT_HOST_IP']}", flush=True)
    time.sleep(600)
"""


def _running_job(tmp_path: Path, home: Path, hosts: int = 2) -> str:
    job = write_job(tmp_path / "job", HOLDER, name="inside", run_method="ranktable",
                    resources={"hosts": hosts, "devices_per_host": 1})  # fmt: skip
    handle = Job.from_yaml(str(job)).submit(LocalBackend(home=str(home)))
    consoles = [home / "jobs" / handle.id / "hosts" / str(i) / "console.log" for i in range(hosts)]
    wait_for(lambda: all(path.is_file() and b"ready on" in path.read_bytes() for path in consoles),
             what="every host ready")  # fmt: skip
    return handle.id


def test_exec_runs_in_the_hosts_environment_and_passes_the_exit_code(tmp_path: Path, home: Path) -> None:
    job_id = _running_job(tmp_path, home)
    handle = LocalBackend(home=str(home)).handle(job_id)
    script = "import os,sys; print(os.environ['MA_CURRENT_HOST_IP'], os.getcwd(), os.environ['RANK_TABLE_FILE'], " \
             "os.environ['MALAUNCH_JOB_ID'], sys.stdin.read()); sys.exit(5)"  # fmt: skip
    result = handle.exec([sys.executable, "-c", script], host=1, stdin=b"fed")
    address, cwd, table, token, fed = result.stdout.decode().split()
    assert (result.exit_code, address, token, fed) == (5, "127.0.0.2", job_id, "fed")
    assert cwd.startswith(str(home / "jobs" / job_id)) and os.path.isfile(table)
    with pytest.raises(ConfigError, match="has no host 7"):
        handle.exec(["true"], host=7)
    handle.stop()
    assert_nothing_running(job_id)


def _runs_with_token(job_id: str, cmdline: bytes) -> bool:
    """Whether a live process carrying the job's token runs ``cmdline`` (NUL-separated, as /proc shows it): a count
    of the job's processes could be met by a short-lived one before exec's command has started."""
    for pid in job_processes(job_id):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if handle.read() == cmdline:
                    return True
        except OSError:
            continue
    return False


def test_stop_ends_what_exec_started(tmp_path: Path, home: Path, cli_env: Dict[str, str]) -> None:
    job_id = _running_job(tmp_path, home, hosts=1)
    proc = subprocess.Popen([os.path.join(VENV_BIN, "ma-submit"), "exec", job_id, "--", "sleep", "300"], env=cli_env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    wait_for(lambda: _runs_with_token(job_id, b"sleep\x00300\x00"), what="the exec'd sleep to carry the job's token")
    stopped = ma_submit(["stop", job_id], cli_env)
    assert stopped.returncode == 0, stopped.stderr
    assert proc.wait(timeout=60) == 143  # its command was ended with the job, and its code passed through
    assert_nothing_running(job_id)


def test_top_and_events_of_a_running_then_stopped_job(tmp_path: Path, home: Path, cli_env: Dict[str, str]) -> None:
    job_id = _running_job(tmp_path, home)
    report = LocalBackend(home=str(home)).handle(job_id).usage()
    assert [row.host for row in report.hosts] == [0, 1]
    for row in report.hosts:
        assert row.processes is not None and row.processes >= 2  # the shim and its rank
        assert row.memory_bytes is not None and row.memory_bytes > 40 << 20
        assert row.cpu_cores is not None and row.cpu_cores >= 0
    top = ma_submit(["top", job_id], cli_env)
    assert top.returncode == 0 and top.stdout.splitlines()[0].split() == ["HOST", "NAME", "CPU", "MEMORY", "PROCS",
                                                                          "ACCELERATORS"]  # fmt: skip
    top_json = json.loads(ma_submit(["top", "--output", "json", job_id], cli_env).stdout)
    assert [h["name"] for h in top_json["hosts"]] == ["127.0.0.1", "127.0.0.2"]
    assert ma_submit(["stop", job_id], cli_env).returncode == 0
    events = json.loads(ma_submit(["events", "--output", "json", job_id], cli_env).stdout)
    reasons = [(e["source"], e["reason"]) for e in events]
    assert reasons[:2] == [("job", "Submitted"), ("job", "RunnerStarted")] and reasons[-1] == ("job", "Stopped")
    assert {("host 0", "Started"), ("host 1", "Started"), ("host 0", "Exited"), ("host 1", "Exited")} <= set(reasons)
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)
    for verb in ("top", "exec"):
        ended = ma_submit([verb, job_id, "--", "true"] if verb == "exec" else [verb, job_id], cli_env)
        assert ended.returncode == 2 and ended.stderr.count("\n") == 1 and "is STOPPED, nothing of it runs" in \
            ended.stderr  # fmt: skip
    for verb in ("events", "top", "exec"):
        unknown = ma_submit([verb, "no-such-job", "--", "true"] if verb == "exec" else [verb, "no-such-job"], cli_env)
        assert unknown.returncode == 4 and unknown.stderr.startswith("ma-submit: error: no job with id 'no-such-job'")
    assert_nothing_running(job_id)


def test_events_of_a_failed_job_with_a_restart_and_its_root_cause(tmp_path: Path, home: Path,
                                                                   cli_env: Dict[str, str]) -> None:  # fmt: skip
    script = """
        import os, sys
        if not os.path.exists("tried"):
            open("tried", "w").close()
            print("first attempt fails with 5", flush=True)
            sys.exit(5)
        print("second attempt fails with 6", flush=True)
        sys.exit(6)
    """
    job = write_job(tmp_path / "job", script, name="evfail", run_method="ranktable",
                    resources={"hosts": 1, "devices_per_host": 1},
                    launcher={"max_restarts": 1, "restart_on": [5], "grace_period": 5})  # fmt: skip
    result = ma_submit([str(job)], cli_env)
    assert result.returncode == 6, result.stderr
    job_id = LocalBackend(home=str(home)).list()[0].id
    events = list(LocalBackend(home=str(home)).handle(job_id).events())
    by_reason = {event.reason: event for event in events}
    assert by_reason["Restarted"].message.startswith(
        "attempt 0 ended with exit code 5 (user_error); root cause rank 0 on host 127.0.0.1 exited with 5; class "
        "user_error; log /")
    assert by_reason["RootCause"].level == "Error" and "exited with 6" in by_reason["RootCause"].message
    assert by_reason["Exited"].message.startswith("exit code 6") and events[-1].reason == "Failed"
    text = ma_submit(["events", job_id], cli_env)
    assert text.returncode == 0 and "ERROR: root cause" in text.stdout
    assert_nothing_running(job_id)


def test_pending_reason_names_the_host_waiting_for_its_rank_table(short_tmp: Path) -> None:
    """A real shim waits for a rank table that is not completed; the host's reason is its own waiting line."""
    tmp_path = short_tmp  # the table's whole path is in the line
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"status": "initializing"}))
    (tmp_path / "boot.py").write_text("print('never')\n")
    console = tmp_path / "console.log"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("MA_", "VC_", "MALAUNCH_"))},
           "MA_RUN_METHOD": "ranktable", "RANK_TABLE_FILE": str(table), "MA_NUM_HOSTS": "1",
           "MA_CURRENT_HOST_IP": "127.0.0.1", "MALAUNCH_RANK_TABLE_TIMEOUT": "60"}  # fmt: skip
    with open(console, "wb") as out:
        shim = subprocess.Popen([sys.executable, "-m", "malaunch.entrypoint", "boot.py"], cwd=tmp_path, env=env,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        hosts = (HostStatus(0, "127.0.0.1", HostState.RUNNING, pid=shim.pid, log_file=str(console)),
                 HostStatus(1, "127.0.0.2", HostState.PENDING))  # fmt: skip
        status = JobStatus(id="j", backend="local", state=JobState.RUNNING, hosts=hosts)
        wait_for(lambda: "rank table" in pending_reason(status), what="the shim's waiting line")
        reason = pending_reason(status)
        assert reason.startswith(f"host 0 (127.0.0.1) is waiting for rank table {table}")
        assert reason.endswith("; host 1 (127.0.0.2) has not started yet")
    finally:
        shim.terminate()
        shim.wait(timeout=30)
    waiting = JobStatus(id="j", backend="local", state=JobState.PENDING)
    assert pending_reason(waiting) == "the job runner has not started the hosts yet"
    assert pending_reason(JobStatus(id="j", backend="local", state=JobState.SUCCEEDED)) == ""


def test_a_waiting_job_is_refused_by_top_and_exec_in_one_line(tmp_path: Path, home: Path) -> None:
    backend = LocalBackend(home=str(home))
    with pytest.raises(JobNotFound):
        backend.events("nope")
    status = JobStatus(id="j", backend="local", state=JobState.PENDING)
    from malaunch.sdk.backends.local.inside import local_usage

    with pytest.raises(JobNotRunning, match="job j is PENDING, nothing of it runs; top needs a running job"):
        local_usage(status)


def test_top_watch_refreshes_until_the_job_ends(tmp_path: Path, home: Path, cli_env: Dict[str, str]) -> None:
    job_id = _running_job(tmp_path, home, hosts=1)
    watcher = subprocess.Popen([os.path.join(VENV_BIN, "ma-submit"), "top", "--watch", "--interval", "0.5", job_id],
                               env=cli_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)  # fmt: skip
    assert watcher.stdout is not None
    headers = 0
    while headers < 2:  # two refreshes seen
        line = watcher.stdout.readline()
        assert line, watcher.stderr.read() if watcher.stderr else ""
        headers += line.startswith("HOST ")
    assert ma_submit(["stop", job_id], cli_env).returncode == 0
    _, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 0 and err == "", err
    assert_nothing_running(job_id)


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2")
def test_exec_runs_in_the_hosts_network_namespace(tmp_path: Path, home: Path) -> None:
    job = write_job(tmp_path / "job", HOLDER, name="nsexec", run_method="ranktable",
                    resources={"hosts": 2, "devices_per_host": 1})  # fmt: skip
    backend = LocalBackend(home=str(home), network="netns")
    handle = Job.from_yaml(str(job)).submit(backend)
    consoles = [home / "jobs" / handle.id / "hosts" / str(i) / "console.log" for i in range(2)]
    wait_for(lambda: all(p.is_file() and b"ready on" in p.read_bytes() for p in consoles), what="hosts ready")
    address = handle.status().hosts[1].address
    assert address.startswith("10.233.")
    shown = handle.exec(["ip", "-o", "-4", "addr", "show", "dev", "eth0"], host=1)
    assert shown.exit_code == 0 and f" {address}/24 " in shown.stdout.decode(), shown.stderr
    handle.stop()
    assert_nothing_running(handle.id)
