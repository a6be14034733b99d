"""What the local backend says about a multi-host job's hosts (issue 43), from recorded facts without running a
job: every start of a host's shim with its own pid, each death the runner answered and its return (``events``),
the wait for a lost host with its time left (``status``, and the console's heartbeats), the job's root cause as
the hosts' coordinator chose it (a report's ``job_cause``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, List

from malaunch.entrypoint.run.attempt_status import announce_attempt, note_event
from malaunch.sdk.backends.local.events import local_events
from malaunch.sdk.backends.local.jobdir import JobPaths
from malaunch.sdk.backends.local.jobend import HostEnd, host_failure, job_failure
from malaunch.sdk.backends.local.pending import pending_reason
from malaunch.sdk.backends.local.state import (
    HostReport,
    job_status,
    new_state,
    note_history,
    read_host_report,
    read_state,
    report_detail,
)
from malaunch.sdk.follow import follow_job
from malaunch.sdk.home import write_json_atomic
from malaunch.sdk.status import HostState, HostStatus, JobState, JobStatus
from test_follow import FakeClock, ScriptedBackend

LOST_CAUSE = {"host": 1, "addr": "127.0.0.2", "rank": None, "code": 75, "signal": None, "kind": "host_lost",
              "line": "ma-entrypoint: host 1 (127.0.0.2) lost: no heartbeat for 3 s", "tail": []}  # fmt: skip


def _job(tmp_path: Path, job_id: str = "j-1") -> tuple[JobPaths, Dict[str, Any]]:
    paths = JobPaths(str(tmp_path), job_id)
    hosts = [{"index": i, "address": f"127.0.0.{i + 1}", "log_file": paths.console_log(i)} for i in range(2)]
    state = new_state(job_id, "mh", 100.0, hosts)
    state.update(state="RUNNING", started_at=100.5, runner_pid=4242)
    for index in range(2):
        Path(paths.host_dir(index), "logs").mkdir(parents=True)
    request = {"hosts": [{"index": i, "env": {"MALAUNCH_LOG_DIR": str(Path(paths.host_dir(i), "logs"))}}
                         for i in range(2)]}  # fmt: skip
    write_json_atomic(paths.plan_file, {"request": request})
    return paths, state


def _reasons(events: List[Any]) -> List[tuple[float, str, str]]:
    return [(event.time, event.source, event.reason) for event in events]


def test_events_show_every_start_with_its_own_pid_each_kill_and_the_replacement(tmp_path: Path) -> None:
    paths, state = _job(tmp_path)
    zero, one = state["hosts"]
    note_history(zero, "started", 101.0, pid=501)
    note_history(one, "started", 101.0, pid=502)
    note_history(one, "killed", 110.0, pid=502, exit_code=137, signal=9, detail="its shim (pid 502) was killed by "
                 "SIGKILL (exit 137): the platform starts it again in 1 s, replacement 1 of 2")  # fmt: skip
    note_history(one, "started", 111.0, pid=777, detail="a replacement: its shim before was killed")
    zero.update(state="RUNNING", pid=501, started_at=101.0)
    one.update(state="RUNNING", pid=777, started_at=111.0)
    write_json_atomic(paths.state_file, state)
    events = local_events(paths)
    assert _reasons(events) == [(100.0, "job", "Submitted"), (100.5, "job", "RunnerStarted"),
                                (101.0, "host 0", "Started"), (101.0, "host 1", "Started"),
                                (110.0, "host 1", "Killed"), (111.0, "host 1", "Started")]  # fmt: skip
    texts = [event.message for event in events]
    assert texts[3] == "127.0.0.2, shim pid 502" and texts[5] == ("127.0.0.2, shim pid 777 (a replacement: its "
                                                                  "shim before was killed)")  # fmt: skip
    assert "killed by SIGKILL (exit 137)" in texts[4] and events[4].level == "Warning"
    assert not any("None" in text for text in texts)


def test_events_of_a_host_lost_without_a_pid_never_say_none(tmp_path: Path) -> None:
    """An elastic host killed and not replaced has no pid any more: its start still says the one it had."""
    paths, state = _job(tmp_path)
    one = state["hosts"][1]
    note_history(one, "started", 101.0, pid=502)
    note_history(one, "lost", 110.0, pid=502, exit_code=137, signal=9, detail="its shim (pid 502) was killed by "
                 "SIGKILL (exit 137) and not replaced: lost")  # fmt: skip
    one.update(state="EXITED", pid=None, exit_code=137, started_at=101.0, ended_at=110.0, lost_at=110.0)
    write_json_atomic(paths.state_file, state)
    said = {event.reason: event.message for event in local_events(paths) if event.source == "host 1"}
    assert said == {"Started": "127.0.0.2, shim pid 502",
                    "HostLost": "its shim (pid 502) was killed by SIGKILL (exit 137) and not replaced: lost"}


def test_a_loss_the_platform_and_the_coordinator_both_recorded_is_one_event_that_says_both(tmp_path: Path) -> None:
    """Host 1 lost, back, and lost again; the coordinator noted the second loss: one HostLost per loss, the second
    at the platform's time with the coordinator's line first (before, two HostLost events for one loss)."""
    paths, state = _job(tmp_path)
    now = time.time()
    one = state["hosts"][1]
    note_history(one, "started", now - 10, pid=502)
    note_history(one, "lost", now - 8, pid=502, exit_code=137, signal=9, detail="lost for good: first")
    note_history(one, "back", now - 6, detail="a machine is back for it")
    note_history(one, "started", now - 6, pid=503)
    note_history(one, "lost", now - 2, pid=503, exit_code=137, signal=9, detail="its shim (pid 503) was killed by "
                 "SIGKILL (exit 137) and not replaced: lost")  # fmt: skip
    one.update(state="EXITED", pid=None, exit_code=137, started_at=now - 6, ended_at=now - 2, lost_at=now - 2)
    write_json_atomic(paths.state_file, state)
    note_event(str(Path(paths.host_dir(0), "logs")), "HostLost", "host 1 (127.0.0.2) lost: its connection closed; "
               "class host_lost", "Warning", host=1)  # fmt: skip
    lost = [(event.time, event.message) for event in local_events(paths) if event.reason == "HostLost"]
    both = ("host 1 (127.0.0.2) lost: its connection closed; class host_lost; as the platform saw it: its shim "
            "(pid 503) was killed by SIGKILL (exit 137) and not replaced: lost")
    assert lost == [(now - 8, "lost for good: first"), (now - 2, both)]


def test_a_state_without_history_still_says_its_start_without_a_pid_it_does_not_know(tmp_path: Path) -> None:
    paths, state = _job(tmp_path)
    state["hosts"][1].update(state="EXITED", pid=None, started_at=101.0, exit_code=137, ended_at=110.0)
    for host in state["hosts"]:
        del host["history"]
    write_json_atomic(paths.state_file, state)
    said = [event.message for event in local_events(paths) if event.reason == "Started"]
    assert said == ["127.0.0.2"]


def test_a_damaged_history_makes_the_state_damaged_with_one_reason(tmp_path: Path) -> None:
    paths, state = _job(tmp_path)
    state["hosts"][1]["history"] = [{"at": 1.0, "kind": "exploded"}]
    write_json_atomic(paths.state_file, state)
    reading = read_state(paths.state_file)
    assert reading.data is None and "hosts[1].history[0].kind must be one of" in reading.problem


def test_what_the_shims_noted_shows_when_it_happened_once_however_many_hosts_saw_it(tmp_path: Path) -> None:
    paths, state = _job(tmp_path)
    write_json_atomic(paths.state_file, state)
    line = "the job's hosts changed (host(s) 1 left): attempt 1 runs on 1 host(s), world size 1"
    for index in range(2):
        note_event(str(Path(paths.host_dir(index), "logs")), "HostsChanged", line, "Warning")
    note_event(str(Path(paths.host_dir(0), "logs")), "HostLost", "host 1 (127.0.0.2) lost: no heartbeat for 3 s",
               "Warning", host=1)  # fmt: skip
    found = [(event.source, event.reason, event.message) for event in local_events(paths)][2:]
    assert found == [("job", "HostsChanged", line),
                     ("host 1", "HostLost", "host 1 (127.0.0.2) lost: no heartbeat for 3 s")]  # fmt: skip


def test_status_says_the_hosts_wait_for_a_lost_one_with_the_time_left(tmp_path: Path) -> None:
    paths, state = _job(tmp_path)
    for index, pid in ((0, 501), (1, 502)):
        state["hosts"][index].update(state="RUNNING", pid=pid, started_at=101.0)
        Path(paths.console_log(index)).write_text("[ma-entrypoint] method=torchrun node_rank=0/2\n")
    write_json_atomic(paths.state_file, state)
    status = job_status(paths, read_state(paths.state_file), backend="local", runner_pid=None, is_ours=bool)
    waiting = {"host": 1, "addr": "127.0.0.2", "why": "lost: no heartbeat for 3 s", "until": time.time() + 600}
    announce_attempt(str(Path(paths.host_dir(0), "logs")), 0, "waiting", waiting)
    said = pending_reason(status, paths)
    assert said.startswith("the job's hosts wait for host 1 (127.0.0.2) to come back (lost: no heartbeat for 3 s): ")
    assert said.endswith((" 600 s left", " 599 s left")), said
    announce_attempt(str(Path(paths.host_dir(0), "logs")), 1, "running")
    assert "wait for host 1" not in pending_reason(status, paths)


def test_a_hosts_detail_names_the_coordinators_root_cause_not_its_own_end() -> None:
    report = {"exit_code": 75, "status": "failed", "failure_class": {"class": "host_lost"},
              "root_cause": {"name": "host 1", "host": "127.0.0.2", "exit_code": 75, "log_file": "", "source": "peer",
                             "tail": ["ma-entrypoint: host 1 (127.0.0.2) lost: no heartbeat for 3 s"]},
              "attempts": [{"attempt": 0, "job_cause": LOST_CAUSE}]}  # fmt: skip
    said = report_detail(report)
    assert said == "root cause host 1 (127.0.0.2) lost: no heartbeat for 3 s; class host_lost"
    assert "75" not in said and "log ;" not in said


def test_following_a_wait_for_a_lost_host_says_it_once_then_its_time_left_in_the_heartbeats() -> None:
    hosts = (HostStatus(0, "127.0.0.1", HostState.RUNNING, pid=5), HostStatus(1, "127.0.0.2", HostState.RUNNING, pid=6))
    statuses = [JobStatus(id="j", backend="scripted", state=JobState.RUNNING, hosts=hosts,
                          pending_reason=f"the job's hosts wait for host 1 (127.0.0.2) to come back (lost: no "
                          f"heartbeat for 3 s): {left} s left") for left in range(20, 0, -1)]  # fmt: skip
    statuses.append(JobStatus(id="j", backend="scripted", state=JobState.FAILED, exit_code=75, hosts=hosts))
    events = list(follow_job(ScriptedBackend(statuses, []).handle("j"), heartbeat=5.0, poll=0.001,
                             clock=FakeClock(1.0)))  # fmt: skip
    texts = [event.text for event in events]
    assert len([text for text in texts if text.startswith("job j waits: the job's hosts wait for host 1")]) == 1
    beats = [e.text for e in events if "no output for" in e.text and e.status and e.status.pending_reason]
    assert beats and all("waiting: the job's hosts wait for host 1 (127.0.0.2)" in text for text in beats)
    assert len({text.rsplit(": ", 1)[-1] for text in beats}) == len(beats)  # the time left runs down


def test_following_a_host_killed_and_replaced_says_both() -> None:
    def status(host_one: HostStatus) -> JobStatus:
        return JobStatus(id="j", backend="scripted", state=JobState.RUNNING,
                         hosts=(HostStatus(0, "127.0.0.1", HostState.RUNNING, pid=5), host_one))  # fmt: skip

    killed = "its shim (pid 6) was killed by SIGKILL (exit 137): the platform starts it again in 1 s"
    statuses = [status(HostStatus(1, "127.0.0.2", HostState.RUNNING, pid=6)),
                status(HostStatus(1, "127.0.0.2", HostState.PENDING, detail=killed)),
                status(HostStatus(1, "127.0.0.2", HostState.RUNNING, pid=9)),
                status(HostStatus(1, "127.0.0.2", HostState.RUNNING, pid=10)),  # a kill between two polls
                JobStatus(id="j", backend="scripted", state=JobState.SUCCEEDED, exit_code=0)]  # fmt: skip
    texts = [e.text for e in follow_job(ScriptedBackend(statuses, []).handle("j"), poll=0.001, clock=FakeClock(0.1))]
    assert f"host 1 (127.0.0.2) ended: {killed}" in texts
    assert "host 1 (127.0.0.2) started, pid 9" in texts and "host 1 (127.0.0.2) started, pid 10" in texts


def test_json_of_the_history_round_trips(tmp_path: Path) -> None:
    paths, state = _job(tmp_path)
    note_history(state["hosts"][0], "started", 101.0, pid=501)
    write_json_atomic(paths.state_file, state)
    data = read_state(paths.state_file).data
    assert data is not None and data["hosts"][0]["history"] == [
        {"at": 101.0, "kind": "started", "pid": 501, "exit_code": None, "signal": None, "detail": ""}]
    assert json.loads(Path(paths.state_file).read_text())["hosts"][1]["history"] == []


def test_following_a_host_the_platform_lost_says_lost_not_failed() -> None:
    lost = "lost: its shim (pid 6) was killed by SIGKILL (exit 137) and not replaced; the job goes on without it"

    def status(host_one: HostStatus, state: JobState = JobState.RUNNING) -> JobStatus:
        return JobStatus(id="j", backend="scripted", state=state, exit_code=0 if state.is_terminal else None,
                         hosts=(HostStatus(0, "127.0.0.1", HostState.RUNNING, pid=5), host_one))  # fmt: skip

    statuses = [status(HostStatus(1, "127.0.0.2", HostState.RUNNING, pid=6)),
                status(HostStatus(1, "127.0.0.2", HostState.EXITED, exit_code=137, detail=lost)),
                status(HostStatus(1, "127.0.0.2", HostState.EXITED, exit_code=137, detail=lost), JobState.SUCCEEDED)]
    texts = [e.text for e in follow_job(ScriptedBackend(statuses, []).handle("j"), poll=0.001, clock=FakeClock(0.1))]
    assert f"host 1 (127.0.0.2) {lost}" in texts and not any("failed" in text for text in texts), texts


RANK_CAUSE = {"host": 1, "addr": "127.0.0.2", "rank": 3, "name": "rank 3", "code": 5, "signal": None,
              "kind": "user_error", "line": "boom", "tail": ["boom"], "log": "/j/hosts/1/logs/rank-3.log"}  # fmt: skip


def test_the_jobs_failure_line_is_one_form_whichever_hosts_shim_is_reaped_first(tmp_path: Path) -> None:
    """Rank 3 of host 1 exited 5; the coordinator chose it and both shims exited 5 with it in their reports. The
    job's line is the coordinator's root cause, on host 1, whichever host the runner reaps first (the old line was
    "host 1 (127.0.0.2) exited with code 5 (root cause rank 3 ...)" when host 1 came first, else the cause alone)."""
    said = []
    for index in (0, 1):
        path = tmp_path / f"report-{index}.json"
        own = {"name": "rank 3" if index == 1 else "another host", "exit_code": 5, "log_file": "", "tail": []}
        path.write_text(json.dumps({"exit_code": 5, "status": "failed", "failure_class": {"class": "user_error"},
                                    "root_cause": own, "attempts": [{"attempt": 0, "job_cause": RANK_CAUSE}]}))
        report = read_host_report(str(path))
        assert report is not None and report.cause_host == 1
        said.append(host_failure(index, f"127.0.0.{index + 1}", 5, report.detail, report, f"/j/hosts/{index}/console"))
    assert said[0] == said[1], said
    host, code, line = said[0]
    assert (host, code) == (1, 5)
    assert line == ("root cause rank 3 on host 1 (127.0.0.2) exited with 5; class user_error; "
                    "log /j/hosts/1/logs/rank-3.log"), line


def _lost_report(tmp_path: Path) -> HostReport:
    """Host 0's shim's report when its coordinator found host 1 lost: it exits 75, naming host 1."""
    path = tmp_path / "report-0.json"
    path.write_text(json.dumps({"exit_code": 75, "status": "failed", "failure_class": {"class": "host_lost"},
                                "attempts": [{"attempt": 0, "job_cause": LOST_CAUSE}]}))  # fmt: skip
    report = read_host_report(str(path))
    assert report is not None and report.cause_host == 1
    return report


def test_a_killed_hosts_own_death_is_the_jobs_in_either_reap_order(tmp_path: Path) -> None:
    """Host 1's shim killed by SIGKILL from outside (no report) and host 0's 75 (its coordinator found host 1 lost:
    a death that says a peer failed): the job's failure is host 1's own death, 137, whichever end came first."""
    survivor = HostEnd(0, "127.0.0.1", 75, "root cause host 1 (127.0.0.2) lost", _lost_report(tmp_path), "/j/0")
    killed = HostEnd(1, "127.0.0.2", 137, "its shim (pid 6) was killed by SIGKILL", None, "/j/hosts/1/console.log")
    decided = [job_failure([survivor, killed]), job_failure([killed, survivor])]
    assert decided[0] == decided[1], decided
    assert decided[0] is not None and decided[0][:2] == (1, 137)
    assert decided[0][2].startswith("host 1 (127.0.0.2) exited with code 137 (its shim (pid 6) was killed by SIGKILL)"
                                    "; class "), decided[0]  # fmt: skip
    assert job_failure([survivor]) == (1, 75, "root cause host 1 (127.0.0.2) lost")  # the killed host not reaped yet


def test_a_host_the_runner_ended_never_outranks_the_coordinators_cause(tmp_path: Path) -> None:
    """A frozen host 1 the runner SIGKILLed as the job ended (a straggler), and host 0 SIGTERMed by the runner
    while ending: their deaths are the teardown's; the job's failure is the survivor's account of host 1 lost,
    and a host whose own rank failed outranks a shim the runner stopped."""
    survivor = HostEnd(0, "127.0.0.1", 75, "root cause host 1 (127.0.0.2) lost", _lost_report(tmp_path), "/j/0")
    straggler = HostEnd(1, "127.0.0.2", 137, "its shim (pid 6) was killed by SIGKILL as the job ended", None, "/j/1",
                        by_runner=True)  # fmt: skip
    assert job_failure([straggler, survivor]) == job_failure([survivor, straggler]) == (1, 75, survivor.detail)
    stopped = HostEnd(0, "127.0.0.1", 143, "shim stopped by SIGTERM", None, "/j/0", by_runner=True)
    own = HostEnd(1, "127.0.0.2", 3, "", None, "/j/1")
    decided = job_failure([stopped, own])
    assert decided == job_failure([own, stopped]) and decided is not None and decided[:2] == (1, 3), decided
