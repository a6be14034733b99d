"""Job state you can trust, with real processes: damaged state files end every command quickly with one clear
line (at the first reading when no runner will write the state again); ``wait`` returns when the state file
records the end, not at a poll's next tick; a runner killed with SIGKILL still yields the hosts' result; a host's
exit code is its shim's report; a full disk (a small tmpfs) is reported with its reason."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest
from malaunch.sdk import HostState, Job, JobState, JobStatus
from malaunch.sdk.backends.base import UnknownWatch
from malaunch.sdk.backends.local import query
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.backends.local.jobdir import JobPaths, job_processes
from malaunch.sdk.backends.local.plan import LocalRequest
from malaunch.sdk.backends.local.state import STATE_VERSION, StateWriter, new_state, read_state, validate_state
from malaunch.sdk.errors import JobStateUnknown
from sdkutil import assert_nothing_running, job_ids, ma_submit, wait_for, write_job

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("cleanup_jobs")]

#: The design bound is 2 s of UNKNOWN before giving up; the margin covers two CLI start-ups on a busy machine.
QUICK = 20.0

QUICK_JOB = """
    import os
    print(f"hello from host {os.environ['VC_TASK_INDEX']}", flush=True)
"""

GOOD_STATE: Dict[str, Any] = {
    "version": STATE_VERSION, "job_id": "demo-1", "name": "demo", "state": "SUCCEEDED", "exit_code": 0,
    "message": "", "created_at": 100.0, "started_at": 101.0, "ended_at": 102.0, "runner_pid": 4242,
    "first_failure": None,
    "hosts": [{"index": 0, "address": "127.0.0.1", "state": "EXITED", "pid": 4243, "exit_code": 0,
               "started_at": 101.0, "ended_at": 102.0, "log_file": "/x/console.log", "detail": ""}],
}  # fmt: skip


def _with(**changes: Any) -> bytes:
    return json.dumps({**GOOD_STATE, **changes}).encode()


def _host_with(**changes: Any) -> bytes:
    return _with(hosts=[{**GOOD_STATE["hosts"][0], **changes}])


DAMAGED: Dict[str, bytes] = {
    "truncated": json.dumps(GOOD_STATE).encode()[:37],
    "empty": b"",
    "binary": bytes(range(256)) * 4,
    "list": b"[1, 2, 3]",
    "null": b"null",
    "hosts-not-a-list": _with(hosts="two"),
    "host-not-an-object": _with(hosts=["host 0"]),
    "pid-a-string": _host_with(pid="4243"),
    "unknown-state": _with(state="EXPLODED"),
    "bad-created-at": _with(created_at="yesterday"),
    "infinite-created-at": json.dumps({**GOOD_STATE, "created_at": float("inf")}).encode(),
    "no-version": json.dumps({k: v for k, v in GOOD_STATE.items() if k != "version"}).encode(),
    "newer-version": _with(version=STATE_VERSION + 1),
    "runner-pid-1": _with(runner_pid=1),
    "deeply-nested": b"[" * 100000,
}


def test_a_good_state_validates() -> None:
    assert validate_state(json.loads(_with()))["hosts"][0]["exit_code"] == 0


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_read_state_never_raises_and_names_the_problem(case: str, tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(DAMAGED[case])
    reading = read_state(str(path))
    assert reading.data is None
    assert reading.problem.startswith("state.json ") and "\n" not in reading.problem


def _quick_job(tmp_path: Path, env: Dict[str, str], home: Path) -> str:
    job = write_job(tmp_path / "quick", QUICK_JOB, name="quick", resources={"hosts": 2, "devices_per_host": 1})
    result = ma_submit([str(job)], env)
    assert result.returncode == 0, result.stdout + result.stderr
    (job_id,) = job_ids(home)
    return job_id


def _timed(args: List[str], env: Dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    result = ma_submit(args, env, timeout=120)
    return result, time.monotonic() - start


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("ma-submit: error: ")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_every_damaged_state_ends_every_command_quickly_with_one_line(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    job_id = _quick_job(tmp_path, cli_env, home)
    source = home / "jobs" / job_id
    for case, content in sorted(DAMAGED.items()):
        damaged_id = f"damaged-{case}"
        shutil.copytree(source, home / "jobs" / damaged_id)
        (home / "jobs" / damaged_id / "state.json").write_bytes(content)
        status, took = _timed(["status", damaged_id], cli_env)
        assert status.returncode == 0 and took < QUICK, (case, status.stderr)
        assert "state:     UNKNOWN" in status.stdout and "state.json" in status.stdout, (case, status.stdout)
        assert "Traceback" not in status.stdout + status.stderr
        for verb in (["wait"], ["logs", "-f"]):
            ended, took = _timed([*verb, damaged_id], cli_env)
            assert ended.returncode == 3 and took < QUICK, (case, verb, ended.returncode, took, ended.stderr)
            line = _one_error_line(ended)
            assert "state is unknown" in line and "state.json" in line, line
        listed = ma_submit(["list"], cli_env)
        assert listed.returncode == 0, (case, listed.stderr)
        assert job_id in listed.stdout and damaged_id not in listed.stdout
        assert f"skipped job {damaged_id}: state.json" in listed.stderr
        shutil.rmtree(home / "jobs" / damaged_id)
    assert_nothing_running(job_id)


def _damaged_copy(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> str:
    """A copy of an ended job under another id, its state file emptied: its runner pid file names no process of
    that id's, so no runner will ever write its state again."""
    job_id = _quick_job(tmp_path, cli_env, home)
    shutil.copytree(home / "jobs" / job_id, home / "jobs" / "damaged-empty")
    (home / "jobs" / "damaged-empty" / "state.json").write_bytes(b"")
    return "damaged-empty"


def test_waiting_on_a_damaged_state_no_runner_will_write_again_ends_at_the_first_reading(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    """The clock never moves and the wait may not sleep: it ends at its first reading, not after
    UNKNOWN_PATIENCE seconds of UNKNOWN (the old code slept, waiting for a state nothing would write again)."""
    damaged = _damaged_copy(tmp_path, cli_env, home)

    def never(seconds: float) -> None:
        raise AssertionError(f"slept {seconds} s waiting for a state file no runner will write again")

    with pytest.raises(JobStateUnknown, match=r"state\.json"):
        LocalBackend(home=str(home)).handle(damaged).wait(sleep=never, clock=lambda: 0.0)


class _NeverGivesUp(UnknownWatch):
    def gave_up(self, status: JobStatus) -> bool:
        return False


def test_following_a_damaged_state_no_runner_will_write_again_ends_without_the_patience(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``logs -f`` of such a job ends by itself, not because UNKNOWN lasted UNKNOWN_PATIENCE seconds (a watch that
    never gives up here; the old code followed forever)."""
    damaged = _damaged_copy(tmp_path, cli_env, home)
    monkeypatch.setattr(query, "UnknownWatch", _NeverGivesUp)
    outcome: List[BaseException] = []

    def follow() -> None:
        try:
            list(LocalBackend(home=str(home)).logs(damaged, follow=True))
        except BaseException as exc:
            outcome.append(exc)

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    follower.join(120)  # a deadline against hanging only
    assert outcome and isinstance(outcome[0], JobStateUnknown), outcome
    assert "state.json" in str(outcome[0])


GO_JOB = """
    import os, time
    print("ready", flush=True)
    while not os.path.exists(os.environ["GO_FILE"]):
        time.sleep(0.05)
    print("done", flush=True)
"""


def _running_until_go(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> tuple[str, Path]:
    """A job that runs until the file ``go`` (returned with its id) exists, seen running."""
    go = tmp_path / "go"
    job = write_job(tmp_path / "w", GO_JOB, name="woken", env={"GO_FILE": str(go)})
    submitted = ma_submit(["--detach", str(job)], cli_env)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    backend = LocalBackend(home=str(home))
    wait_for(lambda: any("ready" in line for line in backend.logs(job_id)), what="the job to run")
    return job_id, go


def test_wait_returns_when_the_state_file_records_the_end_not_at_the_polls_next_tick(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    """A wait that polls once an hour still returns when the job ends: the state file's change wakes it (the old
    wait slept the hour, having read the job RUNNING once)."""
    job_id, go = _running_until_go(tmp_path, cli_env, home)
    backend = LocalBackend(home=str(home))
    read_once = threading.Event()
    calls: List[float] = []

    def clock() -> float:  # the wait asks the clock for its deadline, then after each reading of the status
        calls.append(time.monotonic())
        if len(calls) >= 2:
            read_once.set()
        return calls[-1]

    ended: List[JobStatus] = []
    waiter = threading.Thread(
        target=lambda: ended.append(backend.handle(job_id).wait(3600, poll_interval=3600, clock=clock)), daemon=True
    )
    waiter.start()
    assert read_once.wait(120), "the wait never read the job's status"
    assert not ended  # it read the job RUNNING: it waits
    go.write_text("go")
    waiter.join(120)  # a deadline against hanging only
    assert ended and (ended[0].state, ended[0].exit_code) == (JobState.SUCCEEDED, 0), ended
    assert any("done" in line for line in backend.logs(job_id))
    assert_nothing_running(job_id)


def test_following_events_gives_the_end_when_the_state_file_records_it_not_at_the_polls_next_tick(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    """``events -f`` polling once an hour still gives the hosts' exits and the job's end as they are recorded, and
    ends (the old follower slept the hour after its first look)."""
    job_id, go = _running_until_go(tmp_path, cli_env, home)
    first = threading.Event()
    reasons: List[str] = []

    def follow() -> None:
        for event in LocalBackend(home=str(home)).handle(job_id).events(follow=True, poll=3600):
            reasons.append(event.reason)
            first.set()  # its first look is done: the job was RUNNING then
        reasons.append("the follower ended")

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    assert first.wait(120), "the follower gave no event"
    assert "Succeeded" not in reasons, reasons
    go.write_text("go")
    follower.join(120)  # a deadline against hanging only
    assert reasons[-3:] == ["Exited", "Succeeded", "the follower ended"], reasons
    assert reasons.count("Succeeded") == 1 and reasons[0] == "Submitted", reasons
    assert_nothing_running(job_id)


def test_runner_sigkilled_then_hosts_succeed_is_succeeded(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    script = """
        import os, time
        print("ready", flush=True)
        while not os.path.exists(os.environ["GO_FILE"]):
            time.sleep(0.05)
        print("done", flush=True)
    """
    go = tmp_path / "go"
    job = write_job(tmp_path / "k", script, name="orphaned", resources={"hosts": 2, "devices_per_host": 1},
                    env={"GO_FILE": str(go)})  # fmt: skip
    submitted = ma_submit(["--detach", str(job)], cli_env)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    backend = LocalBackend(home=str(home))
    wait_for(lambda: sum("ready" in line for line in backend.logs(job_id)) == 2, what="both hosts")
    state = read_state(str(home / "jobs" / job_id / "state.json")).data
    assert state is not None and state["runner_pid"] is not None
    os.kill(state["runner_pid"], signal.SIGKILL)
    wait_for(lambda: "ended without recording" in backend.status(job_id).message, what="the runner to be gone")
    assert backend.status(job_id).state is JobState.RUNNING  # the hosts still run
    go.write_text("go")
    waited = ma_submit(["wait", job_id], cli_env)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert "SUCCEEDED" in waited.stdout and "exit code 0" in waited.stdout
    status = json.loads(ma_submit(["status", "--output", "json", job_id], cli_env).stdout)
    assert (status["state"], status["exit_code"]) == ("SUCCEEDED", 0)
    assert [h["exit_code"] for h in status["hosts"]] == [0, 0]
    assert "report" in status["message"]
    assert_nothing_running(job_id)


LIAR = """
import json, os, signal, sys
report = {
    "version": 1, "status": "failed", "exit_code": 1, "shim_signal": None, "shim_signal_name": None,
    "root_cause": {"name": "worker", "rank": 2, "exit_code": 1, "log_file": "/logs/worker_2.log"},
}
with open(os.environ["MALAUNCH_REPORT_FILE"], "w") as handle:
    json.dump(report, handle)
print("report written, now dying of SIGTERM", flush=True)
os.kill(os.getpid(), signal.SIGTERM)
"""


def test_a_hosts_exit_code_and_root_cause_are_its_shims_report(tmp_path: Path, home: Path) -> None:
    """A host process whose wait status (143) contradicts its report (rank 2 exited with 1): the report wins."""
    code = tmp_path / "liar"
    code.mkdir()
    (code / "boot.py").write_text(LIAR)
    backend = LocalBackend(home=str(home))
    job = Job(name="liar", code_dir=str(code), boot_file="boot.py", resources={"hosts": 1, "devices_per_host": 1})
    plan = job.plan(backend=backend)
    request = plan.request
    assert isinstance(request, LocalRequest)
    boot = os.path.join(request.code_dest, "boot.py")
    liar = replace(request, hosts=(replace(request.hosts[0], argv=(sys.executable, boot)),))
    handle = backend.execute(replace(plan, request=liar))
    status = handle.wait(timeout=120)
    assert status.state is JobState.FAILED and status.exit_code == 1, status
    assert status.hosts[0].exit_code == 1 and "root cause rank 2 exited with 1" in status.hosts[0].detail
    _runner_exits(backend, handle.id)
    assert_nothing_running(handle.id)
    assert not (home / "jobs" / handle.id / ".state-reserve").exists()  # given back when the job ended


def _runner_exits(backend: LocalBackend, job_id: str) -> None:
    """The runner records the end a moment before it exits; status() reaps it (it is this process's child)."""
    wait_for(lambda: backend.status(job_id) is not None and not job_processes(job_id), what="the runner to exit")


FILLER = """
    import sys
    line = "x" * 1023 + "\\n"
    for _ in range(4096):  # 4 MiB into a 2 MiB disk
        try:
            sys.stdout.write(line)
        except OSError:
            pass
    print("filler done", flush=True)
"""


def test_full_disk_mid_job_is_reported_with_its_reason(tmp_path: Path, tmpfs: Callable[[Path, str], Path]) -> None:
    small = tmpfs(tmp_path / "small", "2m")
    backend = LocalBackend(home=str(small))
    job_id = None
    try:
        code = tmp_path / "fill"
        write_job(code, FILLER, name="filler")
        handle = Job.from_yaml(str(code / "job.yaml")).submit(backend=backend)
        job_id = handle.id
        status = handle.wait(timeout=180)
        assert status.is_terminal, status
        assert "full" in status.message and str(small) in status.message, status.message
        shown = backend.status(handle.id)
        assert "full" in shown.message
        _runner_exits(backend, handle.id)
        assert_nothing_running(handle.id)
    finally:
        if job_id is not None and job_processes(job_id):  # a failed assertion must not leave the job waiting
            backend.stop(job_id)


def test_a_running_job_with_damaged_files_can_be_stopped_by_prefix_and_deleted(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    job = write_job(tmp_path / "s", "import time\nprint('up', flush=True)\ntime.sleep(600)\n", name="wrecked")
    job_id = ma_submit(["--detach", str(job)], cli_env).stdout.strip()
    backend = LocalBackend(home=str(home))
    wait_for(lambda: any("up" in line for line in backend.logs(job_id)), what="the job to start")
    (home / "jobs" / job_id / "plan.json").write_text("[1, 2]")
    (home / "jobs" / job_id / "state.json").write_bytes(b"\x00\xff garbage")
    assert backend.status(job_id).state is JobState.UNKNOWN
    stopped = backend.stop(job_id[:12])  # a prefix, through the Python API
    assert stopped.id == job_id
    assert_nothing_running(job_id)
    deleted = ma_submit(["delete", job_id], cli_env)
    assert deleted.returncode == 0, deleted.stderr
    assert job_ids(home) == []


def test_a_runner_read_in_the_middle_of_its_exec_is_not_declared_lost() -> None:
    """Right after Popen returns, /proc/<pid>/environ can still be empty (seen here under load): the status
    must not conclude from one such read that the runner is gone."""
    from malaunch.sdk.backends.local.query import still_ours as _still_ours

    for attempt in range(40):
        job_id = f"exec-window-{attempt}"
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(5)"], env={**os.environ, "MALAUNCH_JOB_ID": job_id},
            start_new_session=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            assert _still_ours(child.pid, job_id)
            assert attempt or not _still_ours(child.pid, "another-job")  # a stranger stays a stranger
        finally:
            child.kill()
            child.wait()


WAITER = """
    import os, time
    print("ready", flush=True)
    while not os.path.exists(os.environ["GO_FILE"]):
        time.sleep(0.05)
    print("last line", flush=True)
"""


def _fill(path: Path) -> None:
    """Write ``path`` until its disk is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            os.write(fd, b"p" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def test_a_job_that_succeeds_on_a_full_disk_is_reported_succeeded_and_the_disk_said_once(
    tmp_path: Path, tmpfs: Callable[[Path, str], Path]
) -> None:
    """The issue's case: the only rank prints its last line and exits 0 while the jobs folder's disk is full."""
    small = tmpfs(tmp_path / "small", "2m")
    backend = LocalBackend(home=str(small))
    job_id = None
    try:
        code = tmp_path / "wait"
        go = tmp_path / "go"
        write_job(code, WAITER, name="waiter", env={"GO_FILE": str(go)})
        handle = Job.from_yaml(str(code / "job.yaml")).submit(backend=backend)
        job_id = handle.id
        wait_for(lambda: any("ready" in line for line in backend.logs(handle.id)), what="the rank to start")
        _fill(small / "pad")
        time.sleep(3)  # the runner checks the disk every second and tries to record that it is full
        _fill(small / "pad")  # whatever a failed write gave back is taken again
        go.touch()
        handle.wait(timeout=180)
        _runner_exits(backend, handle.id)
        status = backend.status(handle.id)
        assert status.state is JobState.SUCCEEDED and status.exit_code == 0, status
        assert status.hosts[0].state is HostState.EXITED and status.hosts[0].exit_code == 0, status.hosts
        assert status.message.count("full") == 1, status.message  # said once, not once per file
        assert "could not be written" in status.message and str(small) in status.message, status.message
        assert_nothing_running(handle.id)
    finally:
        if job_id is not None and job_processes(job_id):  # a failed assertion must not leave the job waiting
            backend.stop(job_id)


def test_the_end_is_recorded_in_place_when_not_a_byte_is_free(
    tmp_path: Path, tmpfs: Callable[[Path, str], Path]
) -> None:
    """No reserve and a disk filled to the last byte: the end still lands in state.json (its slack)."""
    small = tmpfs(tmp_path / "small", "1m")
    paths = JobPaths(str(small), "full-20260101-000000-abcdef")
    os.makedirs(paths.job_dir)
    writer = StateWriter(paths)
    state = new_state(paths.job_id, "full", 1.0, [{"index": 0, "address": "127.0.0.1", "log_file": "c.log"}])
    state.update(state="RUNNING", runner_pid=4242)
    assert writer.save(state)
    _fill(small / "pad")
    state.update(state="SUCCEEDED", exit_code=0, ended_at=2.0)
    state["hosts"][0].update(state="EXITED", exit_code=0)
    assert not writer.save(state)  # no room for a new file
    assert writer.save_final(state)  # over the old one, in place
    reading = read_state(paths.state_file)
    assert reading.data is not None, reading.problem
    assert reading.data["state"] == "SUCCEEDED" and reading.data["exit_code"] == 0
    assert reading.data["hosts"][0]["exit_code"] == 0
    assert "could not be written completely" in reading.data["disk_full"]
    assert reading.data["write_error"] is None  # a full disk is said once, as disk_full


LEFT_MOUNTED = """
import os
from pathlib import Path


def test_fails_with_its_disk_mounted(tmp_path, tmpfs):
    small = tmpfs(tmp_path / "small", "1m")
    (small / "pad").write_bytes(b"p" * 4096)
    os.chdir(small)  # busy, as a job's runner with its folder there would be
    Path(os.environ["MOUNTED_AT"]).write_text(str(small))
    assert False, "fails before any clean-up of its own"
"""


def test_a_test_that_fails_with_its_tmpfs_mounted_leaves_no_mount(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("a full disk is emulated with a small tmpfs, which needs root; run the tests as root")
    (tmp_path / "test_inner.py").write_text(LEFT_MOUNTED)
    record, base = tmp_path / "mounted-at", tmp_path / "base"
    tests = Path(__file__).resolve().parents[2]
    env = dict(os.environ, MOUNTED_AT=str(record), PYTHONPATH=os.pathsep.join([str(tests), str(tests / "sdk")]))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest", "-c", os.devnull,
         "--rootdir", str(tmp_path), "--basetemp", str(base), str(tmp_path / "test_inner.py")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "1 failed" in done.stdout, done.stdout[-3000:]
    small = Path(record.read_text())
    assert small.is_relative_to(base)
    mounts = Path("/proc/self/mountinfo").read_text().split("\n")
    assert not [line for line in mounts if f" {small} " in line], "the tmpfs was left mounted"
    assert "rm_rf" not in done.stdout + done.stderr
    shutil.rmtree(base)  # what pytest does to an old base folder: no "Device or resource busy"


def _leave_free(disk: Path, free: int) -> None:
    """Empty ``disk`` but for a pad that leaves ``free`` bytes of it (a multiple of its 4 KiB pages)."""
    for item in disk.iterdir():
        if item.is_dir():
            shutil.rmtree(item)
        else:
            item.unlink()
    _fill(disk / "pad")
    os.truncate(disk / "pad", os.path.getsize(disk / "pad") - free)


def test_a_submit_that_fails_on_a_full_disk_leaves_nothing_running(
    tmp_path: Path, tmpfs: Callable[[Path, str], Path], cli_env: Dict[str, str]
) -> None:
    """The issue's case: with a few KiB free, ``ma-submit --detach`` failed (exit 3) after the runner had started
    (its pid file could not be written), and the runner lived on for seconds. Every amount of free room from
    none to 64 KiB: a submit that fails has nothing of its job running when it says so."""
    small = tmpfs(tmp_path / "small", "1m")
    job = write_job(tmp_path / "code", "print('done', flush=True)\n", name="tight")
    env = {**cli_env, "MALAUNCH_HOME": str(small)}
    failed: List[str] = []
    submitted: List[str] = []
    for free in range(0, 68 << 10, 4 << 10):
        _leave_free(small, free)
        done = ma_submit(["--detach", str(job)], env)
        if done.returncode == 0:
            job_id = done.stdout.strip()
            submitted.append(job_id)
            wait_for(lambda done_id=job_id: not job_processes(done_id), what=f"job {job_id} to end")
            continue
        assert done.returncode == 3, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        named = [word.rstrip(":") for word in done.stderr.split() if word.startswith("tight-")]
        for job_id in named:  # the job folder's mkdir may fail before the id is named: then nothing started
            failed.append(job_id)
            assert job_processes(job_id) == [], f"{free} bytes free: {done.stderr.strip()}"
            assert not (small / "jobs" / job_id).exists(), done.stderr
    assert failed and submitted, (failed, submitted)  # the sweep spans the failures and the first success
