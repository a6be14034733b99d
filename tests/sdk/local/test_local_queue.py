"""Issue 42, the local queue: real jobs, real runners, the real scheduler process.

A machine whose capacity is small (``MALAUNCH_LOCAL_CAPACITY``) runs as many jobs at once as fit, in submit order;
a waiting job says why, is stopped at once, and survives a SIGKILLed scheduler.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any, Dict, List

import pytest
from malaunch.entrypoint.public import read_info
from malaunch.sdk.backends.local.queue.capacity import machine_capacity
from malaunch.sdk.backends.local.queue.scheduler import SCHEDULER_MODULE
from malaunch.sdk.backends.local.queue.store import QueueEntry, plan_queue
from sdkutil import assert_nothing_running, job_ids, ma_submit, wait_for, write_job

#: Each job notes when it runs (a file in RUNNING while it does) and how many ran with it, then waits for its
#: gate file (so the test decides when it ends), and notes that it started once (STARTS, O_APPEND lines).
SCRIPT = """
import os, sys, time
mark = os.path.join(os.environ["RUNNING"], os.environ["MALAUNCH_JOB_ID"])
open(mark, "w").close()
with open(os.environ["STARTS"], "a") as log:
    log.write(f"{os.environ['JOB_INDEX']} {len(os.listdir(os.environ['RUNNING']))}\\n")
gate = os.path.join(os.environ["GATES"], os.environ["JOB_INDEX"])
while not os.path.exists(gate):
    time.sleep(0.05)
os.unlink(mark)
"""


def _jobs(tmp_path: Path, count: int, **fields: Any) -> List[Path]:
    for folder in ("running", "gates"):
        (tmp_path / folder).mkdir(exist_ok=True)
    env = {"RUNNING": str(tmp_path / "running"), "GATES": str(tmp_path / "gates"), "STARTS": str(tmp_path / "starts")}
    return [write_job(tmp_path / f"job{index}", SCRIPT, name=f"q{index}", env={**env, "JOB_INDEX": str(index)},
                      **fields) for index in range(count)]  # fmt: skip


def _env(cli_env: Dict[str, str], capacity: int) -> Dict[str, str]:
    return {**cli_env, "MALAUNCH_LOCAL_CAPACITY": str(capacity)}


def _status(env: Dict[str, str], job_id: str) -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads(ma_submit(["status", "--output", "json", job_id], env).stdout)
    return data


def _starts(tmp_path: Path) -> List[List[int]]:
    path = tmp_path / "starts"
    return [[int(x) for x in line.split()] for line in path.read_text().splitlines()] if path.exists() else []


def _submit(jobs: List[Path], env: Dict[str, str], home: Path) -> List[str]:
    ids: List[str] = []
    for job in jobs:
        done = ma_submit(["--detach", str(job)], env)
        assert done.returncode == 0, done.stderr
        prefix = job.parent.name.replace("job", "q") + "-"
        ids.append(next(name for name in job_ids(home) if name.startswith(prefix)))
    return ids


def _open_gate(tmp_path: Path, index: int) -> None:
    (tmp_path / "gates" / str(index)).touch()


def test_plan_queue_starts_in_order_and_says_why_the_others_wait() -> None:
    entries = [QueueEntry(f"j{n}", need, 0, n, 0.0) for n, need in enumerate((2, 4, 1))]
    start, reasons = plan_queue(entries, 4, 1)
    assert [entry.job_id for entry in start] == ["j0"]
    assert reasons == {"j1": "waiting for 4 devices: 1 free, 0 jobs ahead",
                       "j2": "waiting for 1 device: 1 free, 1 job ahead"}  # fmt: skip
    urgent = QueueEntry("j9", 1, 5, 99, 0.0)
    assert [entry.job_id for entry in plan_queue([*entries, urgent], 4, 1)[0]] == ["j9", "j0"]


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_ten_jobs_on_a_machine_that_fits_two_run_two_at_a_time_in_order(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    env = _env(cli_env, 2)
    ids = _submit(_jobs(tmp_path, 10), env, home)
    wait_for(lambda: len(_starts(tmp_path)) == 2, what="the first two jobs run")
    waiting = _status(env, ids[9])
    assert waiting["state"] == "PENDING"
    assert waiting["pending_reason"] == "waiting for 1 device: 0 free, 7 jobs ahead", waiting
    listed = ma_submit(["list", "--limit", "0"], env).stdout
    assert "(waiting for 1 device: 0 free, 0 jobs ahead)" in listed, listed
    for index in range(10):  # each job ends when told: the next one in line takes its place
        started = min(index + 2, 10)
        wait_for(lambda n=started: len(_starts(tmp_path)) >= n, what=f"job {index + 1} starts")
        _open_gate(tmp_path, index)
    for job_id in ids:
        ma_submit(["wait", job_id], env)
        assert _status(env, job_id)["state"] == "SUCCEEDED"
        assert_nothing_running(job_id)
    starts = _starts(tmp_path)
    assert [index for index, _ in starts] == list(range(10)), starts  # in submit order, each once
    assert max(running for _, running in starts) <= 2, starts
    runners = [os.stat(home / "jobs" / job_id / "runner.pid").st_mtime_ns for job_id in ids]
    assert runners == sorted(runners)
    assert not (home / "queue" / "scheduler.json").exists() or not _scheduler_alive(home)


def _schedulers(home: Path) -> List[int]:
    """Every live scheduler process of ``home`` (by its command line), the one holding the lock or not."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        info = read_info(int(name))
        if SCHEDULER_MODULE.encode() in argv and str(home).encode() in argv and info is not None and not info.zombie:
            found.append(int(name))
    return found


def _scheduler_alive(home: Path) -> bool:
    try:
        data = json.loads((home / "queue" / "scheduler.json").read_text())
    except (OSError, ValueError):
        return False
    info = read_info(int(data["pid"]))
    return info is not None and info.start == data["start"] and not info.zombie


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_stop_and_delete_of_a_waiting_job_work_at_once(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    env = _env(cli_env, 1)
    ids = _submit(_jobs(tmp_path, 3), env, home)
    wait_for(lambda: len(_starts(tmp_path)) == 1, what="the first job runs")
    stopped = ma_submit(["stop", ids[1]], env)
    assert stopped.returncode == 0, stopped.stderr
    status = _status(env, ids[1])
    assert status["state"] == "STOPPED" and "waited in the local queue" in status["message"], status
    assert not (home / "jobs" / ids[1] / "runner.pid").exists()
    logs = ma_submit(["logs", ids[1]], env)  # nothing to show, and it says why
    assert (logs.returncode, logs.stdout) == (0, ""), logs.stderr
    assert logs.stderr == (f"ma-submit: job {ids[1]} has no output: stopped while it waited in the local queue (it "
                           "never started)\n")  # fmt: skip
    assert ma_submit(["delete", ids[2]], env).returncode == 0
    assert not (home / "jobs" / ids[2]).exists()
    assert [name for name in os.listdir(home / "queue") if name[:1].isdigit()] == []
    _open_gate(tmp_path, 0)
    ma_submit(["wait", ids[0]], env)
    assert [index for index, _ in _starts(tmp_path)] == [0]  # neither waiting job ever started


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_sigkilled_scheduler_loses_nothing(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    env = _env(cli_env, 1)
    ids = _submit(_jobs(tmp_path, 3), env, home)
    # each submit that found no scheduler running started one; all but the first to take the lock end by themselves
    # (a slow one may still be booting): the one to kill is the only one left
    wait_for(lambda: _scheduler_alive(home) and len(_schedulers(home)) == 1, what="one scheduler runs")
    data = json.loads((home / "queue" / "scheduler.json").read_text())
    os.kill(int(data["pid"]), signal.SIGKILL)
    wait_for(lambda: not _scheduler_alive(home), what="the scheduler is gone")
    _open_gate(tmp_path, 0)
    state = home / "jobs" / ids[0] / "state.json"  # read as a file: any ma-submit call would take over
    wait_for(lambda: json.loads(state.read_text()).get("ended_at") is not None, what="the first job ends")
    assert len(_starts(tmp_path)) == 1  # nobody started the next one: the scheduler is dead ...
    assert not (home / "jobs" / ids[1] / "runner.pid").exists()
    assert ma_submit(["list"], env).returncode == 0  # ... and the next ma-submit call takes over
    for index, job_id in enumerate(ids[1:], start=1):
        wait_for(lambda n=index: len(_starts(tmp_path)) > n, what=f"job {index} starts")
        _open_gate(tmp_path, index)
        ma_submit(["wait", job_id], env)
        assert _status(env, job_id)["state"] == "SUCCEEDED"
    assert [index for index, _ in _starts(tmp_path)] == [0, 1, 2]


def test_a_job_larger_than_the_machine_is_refused_at_submit_in_one_line(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    (job,) = _jobs(tmp_path, 1, resources={"hosts": 2, "devices_per_host": 2})
    done = ma_submit([str(job)], _env(cli_env, 3))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "takes 4 devices" in lines[0] and "(3: MALAUNCH_LOCAL_CAPACITY)" in lines[0]
    assert job_ids(home) == []


def test_a_cpu_counted_machine_runs_a_larger_job_alone_and_a_counted_one_refuses_it(tmp_path: Path) -> None:
    """With no accelerator and nothing set, capacity is the CPUs, which CPU jobs share: the README's 2 x 2 job on a
    2-core machine takes the whole machine (it waits for it, then runs alone) instead of being refused; a capacity
    that was set, or accelerators counted, still refuses a job larger than the machine."""
    soft = machine_capacity({}, None, dev=str(tmp_path))  # a /dev with no accelerator
    assert soft.soft and soft.need_of(2, 2) == min(4, soft.devices) and soft.need_of(1, 1) == 1
    given = machine_capacity({"MALAUNCH_LOCAL_CAPACITY": "2"}, None, dev=str(tmp_path))
    assert not given.soft and given.need_of(2, 2) == 4


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_damaged_queue_entry_is_rebuilt_in_its_place_or_ends_its_job_in_one_line(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    """A waiting job's queue file cut short (a full disk, a crash of the machine) was skipped by every reader: the
    scheduler saw an empty queue and exited, and the job stayed PENDING for ever ('the job runner has not started
    the hosts yet'), its 'ma-submit wait' never ending. Its name holds its place and id and its folder its plan:
    it is rebuilt and starts in its turn; one whose plan cannot be read either ends FAILED, saying so."""
    env = _env(cli_env, 1)
    ids = _submit(_jobs(tmp_path, 3), env, home)
    wait_for(lambda: len(_starts(tmp_path)) == 1, what="the first job runs")
    entries = {name.split("-", 1)[1].rsplit(".", 1)[0]: home / "queue" / name
               for name in os.listdir(home / "queue") if name[:1].isdigit()}  # fmt: skip
    for job_id in ids[1:]:
        entries[job_id].write_text('{"job_id": ')
    (home / "jobs" / ids[2] / "plan.json").write_text("{")
    _open_gate(tmp_path, 0)
    wait_for(lambda: len(_starts(tmp_path)) == 2, what="the job whose entry was rebuilt starts")
    _open_gate(tmp_path, 1)
    assert ma_submit(["wait", ids[1]], env, timeout=120).returncode == 0
    ended = ma_submit(["wait", ids[2]], env, timeout=120)
    status = _status(env, ids[2])
    assert status["state"] == "FAILED" and ended.returncode != 0, (status, ended.stderr)
    assert status["message"] == (f"its queue entry {entries[ids[2]]} was damaged and its plan.json cannot be read, "
                                 "so it never started; submit the job file again"), status["message"]  # fmt: skip
    assert [index for index, _ in _starts(tmp_path)] == [0, 1]
    assert [name for name in os.listdir(home / "queue") if name[:1].isdigit()] == []
