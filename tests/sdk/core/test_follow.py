"""Following a job (progress, heartbeats, the end), log tailing, waiting, and the job-id / exit-code helpers.

A scripted :class:`Backend` subclass stands in for a real one: it implements the whole interface, so the code
under test cannot call anything a real backend would not have.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterator, List

import pytest
from malaunch.sdk import Backend, JobHandle, JobState, JobStatus, WaitTimeout
from malaunch.sdk.backends.base import make_job_id
from malaunch.sdk.backends.logtail import follow_files, read_files
from malaunch.sdk.errors import BackendError, ConfigError, JobNotFound, JobStateUnknown, SpecError, exit_code_for
from malaunch.sdk.follow import follow_job
from malaunch.sdk.plan import SubmitPlan
from malaunch.sdk.spec.model import JobSpec
from malaunch.sdk.status import HostState, HostStatus, exit_code_of


def host(index: int, state: HostState, code: int | None = None) -> HostStatus:
    return HostStatus(index=index, address=f"127.0.0.{index + 1}", state=state, pid=100 + index, exit_code=code)


class ScriptedBackend(Backend):
    """Returns the scripted statuses in turn (the last one forever); logs end once a terminal status was shown."""

    name = "scripted"

    def __init__(self, statuses: List[JobStatus], lines: List[str]) -> None:
        self.statuses = statuses
        self.lines = lines
        self.calls = 0
        self.ended = threading.Event()

    def plan(self, spec: JobSpec, *, job_id: str, now: float) -> SubmitPlan:
        raise NotImplementedError

    def execute(self, plan: SubmitPlan) -> JobHandle:
        raise NotImplementedError

    def status(self, job_id: str) -> JobStatus:
        status = self.statuses[min(self.calls, len(self.statuses) - 1)]
        self.calls += 1
        if status.is_terminal:
            self.ended.set()
        return status

    def logs(self, job_id: str, *, follow: bool = False) -> Iterator[str]:
        yield from self.lines
        if follow:
            self.ended.wait(timeout=30)

    def stop(self, job_id: str) -> JobStatus:
        return self.statuses[-1]

    def list(self) -> List[JobStatus]:
        return [self.statuses[-1]]


def job(state: JobState, *hosts: HostStatus, code: int | None = None) -> JobStatus:
    return JobStatus(id="j", backend="scripted", state=state, exit_code=code, hosts=hosts, started_at=0.0, ended_at=2.0)


class FakeClock:
    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_follow_reports_hosts_heartbeats_and_end() -> None:
    running = job(JobState.RUNNING, host(0, HostState.RUNNING), host(1, HostState.RUNNING))
    one_done = job(JobState.RUNNING, host(0, HostState.EXITED, 0), host(1, HostState.RUNNING))
    statuses = (
        [running] * 30
        + [one_done] * 5
        + [job(JobState.FAILED, host(0, HostState.EXITED, 0), host(1, HostState.EXITED, 6), code=6)]
    )
    backend = ScriptedBackend(statuses, ["[host 0] hello"])
    events = list(follow_job(backend.handle("j"), heartbeat=10.0, poll=0.001, clock=FakeClock(1.0)))
    texts = [e.text for e in events]
    first_log = next(i for i, e in enumerate(events) if e.kind == "log")
    assert texts[first_log] == "[host 0] hello"  # after the job's and its hosts' start (issue 29)
    started = ["host 0 (127.0.0.1) started, pid 100", "host 1 (127.0.0.2) started, pid 101"]
    assert texts[:first_log] == ["job j is RUNNING", *started]
    assert "host 0 (127.0.0.1) started, pid 100" in texts and "host 1 (127.0.0.2) started, pid 101" in texts
    assert "host 0 (127.0.0.1) finished, exit code 0" in texts
    assert any(t.startswith("host 1 (127.0.0.2) failed, exit code 6") for t in texts)
    beats = [t for t in texts if "no output for" in t]
    assert beats, "a silent job must show heartbeats"
    assert "hosts running: [0, 1]" in beats[0]  # a list of host indexes, never read as a count
    assert events[-1].kind == "end" and events[-1].status is not None
    assert exit_code_of(events[-1].status) == 6
    assert "job j FAILED after 2.0s, exit code 6" in events[-1].text


def test_no_heartbeat_while_output_flows() -> None:
    done = job(JobState.SUCCEEDED, host(0, HostState.EXITED, 0), code=0)
    backend = ScriptedBackend([done], [f"line {i}" for i in range(50)])
    events = list(follow_job(backend.handle("j"), heartbeat=10.0, poll=0.001, clock=FakeClock(0.1)))
    assert [e.text for e in events if e.kind == "log"] == [f"line {i}" for i in range(50)]
    assert not [e for e in events if "no output for" in e.text]
    assert events[-1].kind == "end"


def test_wait_times_out_with_clear_error() -> None:
    backend = ScriptedBackend([job(JobState.RUNNING)], [])
    clock = FakeClock(1.0)
    with pytest.raises(WaitTimeout) as info:
        backend.handle("j").wait(timeout=5, sleep=lambda s: None, clock=clock)
    assert "did not end within 5s" in str(info.value) and "ma-submit stop j" in str(info.value)
    assert exit_code_for(info.value) == 124


def test_wait_returns_final_status() -> None:
    statuses = [job(JobState.PENDING), job(JobState.RUNNING), job(JobState.SUCCEEDED, code=0)]
    backend = ScriptedBackend(statuses, [])
    assert backend.handle("j").wait(sleep=lambda s: None).state is JobState.SUCCEEDED


def test_log_files_are_tailed_with_prefixes(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_bytes(b"[rank 1] one\ntwo\n")  # a rank's line names its rank and host; one without a prefix its host
    ended = {"flag": False}
    ticks = {"n": 0}

    def sleep(_: float) -> None:
        ticks["n"] += 1
        if ticks["n"] == 1:
            b.write_bytes(b"b1\nb2-without-newline")
            with a.open("ab") as handle:
                handle.write(b"thr\xffee\n")
        if ticks["n"] == 3:
            ended["flag"] = True

    lines = list(follow_files([(0, str(a)), (1, str(b))], lambda: ended["flag"], sleep=sleep))
    assert lines == ["[host 0 rank 1] one", "[host 0] two", "[host 0] thr\ufffdee", "[host 1] b1",
                     "[host 1] b2-without-newline"]  # fmt: skip
    assert list(read_files([(0, str(a)), (3, str(tmp_path / "missing"))])) == [
        "[host 0 rank 1] one",
        "[host 0] two",
        "[host 0] thr\ufffdee",
    ]


def test_job_ids_are_safe_and_sortable() -> None:
    assert make_job_id("My_Job!", 0.0, "ab12") == "my-job-19700101-000000-ab12"
    assert make_job_id("___", 86400.0, "x") == "job-19700102-000000-x"


def test_exit_codes_by_error_kind() -> None:
    assert exit_code_for(SpecError("resources.hosts", "must be >= 1", 0)) == 2
    assert exit_code_for(ConfigError("bad", 1, "fix it")) == 2
    assert exit_code_for(BackendError("boom")) == 3
    assert exit_code_for(JobNotFound("x", "local", "see list")) == 4
    assert (
        str(SpecError("resources.hosts", "must be >= 1", 0)) == "resources.hosts: must be >= 1, got 0; fix the job file"
    )


def test_exit_code_of_statuses() -> None:
    assert exit_code_of(job(JobState.SUCCEEDED, code=0)) == 0
    assert exit_code_of(job(JobState.FAILED, code=6)) == 6
    assert exit_code_of(job(JobState.FAILED)) == 1
    assert exit_code_of(job(JobState.STOPPED, code=143)) == 143
    assert JobState.parse("weird") is JobState.UNKNOWN and not JobState.UNKNOWN.is_terminal


def test_a_status_stuck_in_unknown_ends_waiting_and_following() -> None:
    unknown = JobStatus(id="j", backend="scripted", state=JobState.UNKNOWN, message="state.json is empty")
    backend = ScriptedBackend([unknown], [])
    with pytest.raises(JobStateUnknown, match=r"state\.json is empty"):
        backend.handle("j").wait(poll_interval=0.0, sleep=lambda _: None, clock=FakeClock(0.5))
    backend.ended.set()  # let the log pump end
    with pytest.raises(JobStateUnknown) as info:
        list(follow_job(backend.handle("j"), poll=0.001, clock=FakeClock(0.5)))
    assert exit_code_for(info.value) == 3
