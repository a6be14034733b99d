"""The local backend plays a platform that loses a host's machine for good and later gives one back
(``LocalBackend.lose_host`` / ``restore_host``, :mod:`malaunch.sdk.backends.local.hostops`): the runner kills the
host's whole tree and does not start it again, never ends the job for it (the shims decide), and starts it
again on request; ``ma-submit events`` shows both. Real runners, real shims."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from hostjobs import hosts_job, status_json, submit_started
from malaunch.sdk import ConfigError, JobNotRunning
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.backends.local.events import local_events
from malaunch.sdk.backends.local.hostops import request_file, take_requests, write_request
from malaunch.sdk.backends.local.jobdir import JobPaths, is_job_process
from malaunch.sdk.backends.local.state import job_status, new_state, read_state
from malaunch.sdk.home import write_json_atomic
from sdkutil import assert_nothing_running, ma_submit, wait_for


def _submit(tmp_path: Path, cli_env: Dict[str, str], home: Path, plan: str, **launcher: Any) -> str:
    """Submit a 2-host job detached; its id once both hosts run attempt 0."""
    return submit_started(hosts_job(tmp_path, "hr", plan, **launcher), tmp_path, cli_env, home)


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_host_lost_and_given_back_rejoins_and_the_job_succeeds(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    job_id = _submit(tmp_path, cli_env, home, "0:0=sleep,0:1=sleep", max_restarts=2, restart_on="always",
                     host_wait=60)  # fmt: skip
    backend = LocalBackend(home=str(home))
    shim = backend.status(job_id).hosts[1].pid
    assert shim is not None
    lost = ma_submit(["host", "lose", job_id, "1"], cli_env)  # ma-submit host, as a user tries it by hand
    assert (lost.returncode, lost.stderr) == (0, ""), lost.stderr
    assert f"id:        {job_id}\nstate:     RUNNING\n" in lost.stdout, lost.stdout  # the job goes on without it
    wait_for(lambda: backend.status(job_id).hosts[1].state.value == "EXITED", 30, "host 1 reaped as lost")
    assert not is_job_process(shim, job_id)
    console = home / "jobs" / job_id / "hosts" / "0" / "console.log"
    wait_for(lambda: "lost" in console.read_text(), 60, "host 0's shim noticing host 1 lost")
    assert backend.status(job_id).state.value == "RUNNING"  # host 0 waits for it (host_wait)
    back = ma_submit(["host", "restore", job_id[:12], "1"], cli_env)  # a prefix of the id, as every verb takes
    assert (back.returncode, back.stderr) == (0, ""), back.stderr
    done = ma_submit(["wait", job_id], cli_env)
    status = status_json(job_id, cli_env)
    assert status["state"] == "SUCCEEDED", (done.stdout[-2000:], status)
    assert (tmp_path / "marks" / "started-h1-a1").exists() and (tmp_path / "marks" / "started-h0-a1").exists()
    events = ma_submit(["events", "--output", "json", job_id], cli_env)
    assert events.returncode == 0, events.stderr
    kinds = [(item["host"], item["reason"]) for item in json.loads(events.stdout)]
    assert kinds.index((1, "HostLost")) < kinds.index((1, "HostBack")), kinds
    assert_nothing_running(job_id)


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_host_lost_for_good_is_left_to_the_shims(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    """Not elastic: the runner does not fail the job with the lost host's 137; the survivor waits host_wait for
    it and exits 75 (host_lost), which ends the job."""
    job_id = _submit(tmp_path, cli_env, home, "0:0=sleep,0:1=sleep", host_wait=2)
    LocalBackend(home=str(home)).lose_host(job_id, 1)
    ma_submit(["wait", job_id], cli_env)
    status = status_json(job_id, cli_env)
    assert (status["state"], status["exit_code"]) == ("FAILED", 75), status
    assert status["failure_class"]["class"] == "host_lost"
    assert_nothing_running(job_id)


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_requests_are_refused_for_an_ended_job_or_a_host_it_does_not_have(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    job_id = _submit(tmp_path, cli_env, home, "0:0=sleep,0:1=sleep")
    backend = LocalBackend(home=str(home))
    with pytest.raises(ConfigError, match=r"^host: job .* has hosts 0 to 1, got 2; name one of them$"):
        backend.lose_host(job_id, 2)
    refused = ma_submit(["host", "lose", job_id, "2"], cli_env)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "has hosts 0 to 1, got 2; name one of them" in refused.stderr, refused.stderr
    refused = ma_submit(["host", "restore", job_id, "0"], cli_env)
    assert refused.returncode == 2 and "only a lost host is brought back" in refused.stderr, refused.stderr
    backend.stop(job_id)
    with pytest.raises(JobNotRunning, match="is STOPPED"):
        backend.restore_host(job_id, 1)
    refused = ma_submit(["host", "restore", job_id, "1"], cli_env)
    assert refused.returncode == 2 and "is STOPPED" in refused.stderr and "Traceback" not in refused.stderr
    assert not Path(request_file(JobPaths(str(home), job_id), 1)).exists()


def test_damaged_or_unknown_requests_are_dropped_and_said(tmp_path: Path) -> None:
    paths = JobPaths(str(tmp_path), "j-1")
    write_request(paths, 1, "restore")
    write_request(paths, 0, "lose")
    bad = Path(request_file(paths, 5))
    bad.write_text('{"action": "lose", "host": 5}')
    Path(request_file(paths, 3)).write_text("{not json")
    taken, refused = take_requests(paths, hosts=2)
    assert taken == [(0, "lose"), (1, "restore")]
    assert len(refused) == 2 and all("ignored" in line for line in refused)
    assert take_requests(paths, hosts=2) == ([], [])  # each request is taken once


def test_events_show_each_change_of_an_elastic_jobs_hosts_once(tmp_path: Path) -> None:
    """The shims record each change in their reports (``hosts.membership``); two hosts saw the second one."""
    paths = JobPaths(str(tmp_path), "j-2")
    hosts = [{"index": i, "address": f"127.0.0.{i + 1}", "log_file": paths.console_log(i)} for i in range(2)]
    state = new_state("j-2", "el", 100.0, hosts)
    state["hosts"][1].update(lost_at=110.0, restored_at=120.0)
    Path(paths.job_dir).mkdir(parents=True)
    write_json_atomic(paths.state_file, state)
    left = {"at": 112.0, "attempt": 1, "members": [0], "world_size": 1, "left": [1], "joined": [], "charged": False,
            "line": "the job's hosts changed (host(s) 1 left): attempt 1 runs on 1 host(s), world size 1"}
    back = {"at": 125.0, "attempt": 2, "members": [0, 1], "world_size": 2, "left": [], "joined": [1],
            "charged": False, "line": "the job's hosts changed (host(s) 1 joined): attempt 2 runs on 2 host(s)"}
    for index, changes in ((0, [left, back]), (1, [back])):
        Path(paths.host_dir(index)).mkdir(parents=True)
        Path(paths.report_file(index)).write_text(json.dumps({"hosts": {"min_hosts": 1, "membership": changes}}))
    events = local_events(paths)
    said = [(event.time, event.source, event.reason, event.level) for event in events]
    assert said == [(100.0, "job", "Submitted", "Info"), (110.0, "host 1", "HostLost", "Warning"),
                    (112.0, "job", "HostsChanged", "Warning"), (120.0, "host 1", "HostBack", "Info"),
                    (125.0, "job", "HostsChanged", "Info")]  # fmt: skip
    assert "world size 1" in events[2].message


def test_with_the_runner_gone_a_host_lost_for_good_does_not_fail_the_job(tmp_path: Path) -> None:
    """The runner died after host 1 was lost (killed: 137) and host 0's shim reported success: SUCCEEDED."""
    paths = JobPaths(str(tmp_path), "j-3")
    hosts = [{"index": i, "address": f"127.0.0.{i + 1}", "log_file": paths.console_log(i)} for i in range(2)]
    state = new_state("j-3", "el", 100.0, hosts)
    state.update(state="RUNNING", started_at=101.0, runner_pid=4242)
    state["hosts"][0].update(state="RUNNING", pid=4243, started_at=101.0)
    state["hosts"][1].update(state="EXITED", exit_code=137, started_at=101.0, ended_at=110.0, lost_at=110.0)
    Path(paths.host_dir(0)).mkdir(parents=True)
    write_json_atomic(paths.state_file, state)
    Path(paths.report_file(0)).write_text(json.dumps({"exit_code": 0, "status": "succeeded"}))
    reading = read_state(paths.state_file)
    status = job_status(paths, reading, backend="local", runner_pid=4242, is_ours=lambda pid: False)
    assert (status.state.value, status.exit_code) == ("SUCCEEDED", 0), status.message
