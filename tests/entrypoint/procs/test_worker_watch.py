"""The watch takes a launcher's helpers for workers only when it cannot tell them apart.

msrun sets ``MS_NODE_ID``, ``MS_ROLE=MS_WORKER`` and ``RANK_ID`` in its own environment before it starts each
worker (with ``setsid``), so every helper it starts afterwards (the log ``tail``, the ``grep`` it runs over the
scheduler's log when a worker failed) carries the last worker's rank. Taken for a worker, such a helper made the
watch believe it had seen that rank, and the shim could no longer name the worker msrun reported by pid (the
flaky msrun root-cause test). Real processes: a launcher that starts a helper, then a worker.
"""

from __future__ import annotations

import io
import os
import queue
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable, Iterator, List, Tuple

import pytest
from malaunch.entrypoint.contract.cluster_env import parse_cluster_env
from malaunch.entrypoint.launchers.msrun import MsrunLauncher
from malaunch.entrypoint.launchers.torchrun.launcher import TorchrunLauncher
from malaunch.entrypoint.plan.inputs import LaunchInputs
from malaunch.entrypoint.plan.launch_plan import LaunchPlan
from malaunch.entrypoint.plan.prepare import python_dir_for
from malaunch.entrypoint.run.events import Event, LauncherLine
from malaunch.entrypoint.run.launcher import Launcher
from malaunch.entrypoint.run.output import Output, prepare_folders
from malaunch.entrypoint.run.procs import proctree
from malaunch.entrypoint.run.procs.watch import WorkerDeath, WorkerWatch
from malaunch.entrypoint.run.workers import Workers

TOKEN_VAR = "MALAUNCH_SHIM_TOKEN"
TOKEN = f"{os.getpid()}-watch-test"

# The "launcher": a helper carrying a worker's rank, not leading a group, that has exec'd before the worker is
# even forked; then the worker, in a session of its own, as msrun starts it. Both carry the token.
LAUNCHER = textwrap.dedent(
    """
    import os, subprocess, sys
    env = dict(os.environ, MS_NODE_ID="1", MS_ROLE="MS_WORKER", RANK_ID="1")
    helper = subprocess.Popen([sys.executable, "-c", "import sys, time; print('up', flush=True); time.sleep(600)"],
                              env=env, stdout=subprocess.PIPE)
    helper.stdout.readline()
    env["MS_NODE_ID"] = env["RANK_ID"] = "0"
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=env,
                              start_new_session=True)
    print(helper.pid, worker.pid, flush=True)
    sys.stdin.read()
    """
)


@pytest.fixture
def launcher() -> Iterator[Tuple[subprocess.Popen[str], int, int]]:
    proc = subprocess.Popen([sys.executable, "-c", LAUNCHER], env=dict(os.environ, **{TOKEN_VAR: TOKEN}),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    helper, worker = (int(word) for word in proc.stdout.readline().split())
    try:
        yield proc, helper, worker
    finally:
        for pid in (helper, worker):
            info = proctree.read_info(pid)
            if info is not None:
                proctree.signal_proven(proctree.ProcKey(pid, info.start), signal.SIGKILL)
        proc.kill()
        proc.wait()


def _watch(proc: subprocess.Popen[str], leaders_only: bool) -> Tuple[WorkerWatch, queue.SimpleQueue[WorkerDeath]]:
    deaths: queue.SimpleQueue[WorkerDeath] = queue.SimpleQueue()
    watch = WorkerWatch(TOKEN_VAR, TOKEN, {proc.pid: 0}, deaths.put, leaders_only=leaders_only)
    watch.start()
    return watch, deaths


def _until(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.01)


@pytest.mark.process
def test_a_launcher_helper_with_a_workers_rank_is_no_worker_when_workers_lead_their_groups(
    launcher: Tuple[subprocess.Popen[str], int, int],
) -> None:
    proc, helper, worker = launcher
    watch, deaths = _watch(proc, leaders_only=True)
    try:
        _until(lambda: worker in watch.pid_ranks, "the watch to see the worker")
        # the helper was running before the worker was forked: the scan that found the worker looked at it too
        assert watch.pid_ranks == {worker: 0}
        os.kill(helper, signal.SIGKILL)
        os.kill(worker, signal.SIGKILL)
        seen: List[WorkerDeath] = [deaths.get(timeout=60)]
    finally:
        watch.stop()
    while not deaths.empty():
        seen.append(deaths.get())
    # the helper's death is no worker's
    assert [(d.pid, d.rank, d.code) for d in seen] == [(worker, 0, -signal.SIGKILL)]


@pytest.mark.process
def test_without_that_promise_a_child_with_a_rank_is_taken_for_a_worker(
    launcher: Tuple[subprocess.Popen[str], int, int],
) -> None:
    """What torchrun's workers get (no promise about groups): the environment decides."""
    proc, helper, worker = launcher
    watch, _deaths = _watch(proc, leaders_only=False)
    try:
        _until(lambda: worker in watch.pid_ranks and helper in watch.pid_ranks, "the watch to see both")
        assert watch.pid_ranks == {helper: 1, worker: 0}
    finally:
        watch.stop()


@pytest.mark.parametrize(("launcher_class", "promise"), [(MsrunLauncher, True), (TorchrunLauncher, False),
                                                         (Launcher, False)])  # fmt: skip
def test_only_msrun_promises_that_its_workers_lead_their_groups(launcher_class: type, promise: bool) -> None:
    assert launcher_class.workers_lead_groups is promise


def msrun_plan(tmp_path: Path) -> LaunchPlan:
    """This host's msrun plan, as the shim makes it for the interpreter running the tests."""
    env = {"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": "2", "MALAUNCH_LOG_DIR": str(tmp_path / "logs")}
    python_dir, needs_link = python_dir_for(sys.executable, str(tmp_path / "logs" / ".python"))
    assert not needs_link  # a venv's python
    inputs = LaunchInputs(boot_file=str(tmp_path / "train.py"), boot_args=(), interpreter=sys.executable,
                          cwd=str(tmp_path), hostname="box", path_env=os.environ.get("PATH", "/usr/bin:/bin"),
                          master_ip="127.0.0.1", python_dir=python_dir)  # fmt: skip
    return MsrunLauncher().plan(parse_cluster_env(env), inputs)


# A stand-in for msrun, started as the shim starts msrun (the plan's environment: the birth folder and the
# interpreter's folder first on PATH): it starts msrun's scheduler (MS_ROLE=MS_SCHED) and one worker per given code
# the way msrun does (``python`` from PATH, a rank in the environment, ``setsid``, stdout to ``worker_N.log``), each
# exiting at once with its code. It tells their pids once all are dead, and reaps them only when the test says
# (msrun: at its next poll, up to a second later), then prints msrun's line for each worker.
STANDIN = textwrap.dedent(
    """
    import os, subprocess, sys
    folder, codes = sys.argv[1], [int(code) for code in sys.argv[2:]]
    def start(env, code, log, **how):
        with open(os.path.join(folder, log), "w") as handle:
            return subprocess.Popen(["python", "-c", f"import sys; sys.exit({code})"], env=dict(os.environ, **env),
                                    stdout=handle, stderr=subprocess.STDOUT, **how)
    children = [start({"MS_ROLE": "MS_SCHED"}, 1, "scheduler.log")]
    for rank, code in enumerate(codes):
        env = {"MS_ROLE": "MS_WORKER", "MS_NODE_ID": str(rank), "RANK_ID": str(rank)}
        children.append(start(env, code, f"worker_{rank}.log", preexec_fn=os.setsid))
    for child in children:
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped
    print(*(child.pid for child in children), flush=True)
    sys.stdin.readline()
    for child in children[1:]:
        child.wait()
        print(f"Worker process {child.pid} exit with exception. Error code: {child.returncode}.", flush=True)
    children[0].wait()
    sys.stdin.readline()
    """
)


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[Tuple[subprocess.Popen[str], LaunchPlan, List[int]]]:
    """The stand-in msrun of an msrun plan, its workers dead (exit codes 3 and 5) but not reaped; and their pids
    (the scheduler's first)."""
    plan = msrun_plan(tmp_path)
    prepare_folders(plan)
    folder = tmp_path / "logs" / "msrun"
    folder.mkdir(parents=True)
    env = {**os.environ, **plan.processes[0].env, TOKEN_VAR: TOKEN}
    proc = subprocess.Popen([sys.executable, "-c", STANDIN, str(folder), "3", "5"], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    try:
        yield proc, plan, [int(word) for word in proc.stdout.readline().split()]
    finally:
        proc.kill()
        proc.wait()


def _workers(plan: LaunchPlan, proc: subprocess.Popen[str]) -> Tuple[Workers, queue.SimpleQueue[Event]]:
    """The run's view of msrun's workers (the supervisor's), watching the stand-in."""
    events: queue.SimpleQueue[Event] = queue.SimpleQueue()
    launcher = MsrunLauncher()
    workers = Workers(plan, launcher, Output(plan, io.BytesIO(), io.BytesIO(), launcher), events.put)
    info = proctree.read_info(proc.pid)
    assert info is not None
    workers.start(TOKEN, [proctree.ProcKey(proc.pid, info.start)])
    return workers, events


@pytest.mark.process
def test_workers_dead_before_the_first_look_are_reported_with_their_ranks(
    standin: Tuple[subprocess.Popen[str], LaunchPlan, List[int]],
) -> None:
    """Every worker is a zombie when the watch first looks (no environment left to read): the birth record each
    left names its rank. On the tree before, none was taken for a worker: no death was reported at all."""
    proc, plan, (scheduler, rank0, rank1) = standin
    workers, events = _workers(plan, proc)
    try:
        deaths = [events.get(timeout=30), events.get(timeout=30)]
        assert proctree.read_info(scheduler) is not None  # not reaped: the watch had no other way to know
        assert proc.stdin is not None
        proc.stdin.write("\n")  # msrun reaps now
        proc.stdin.flush()
        assert proc.stdout is not None
        lines = [proc.stdout.readline(), proc.stdout.readline()]
    finally:
        workers.stop()
    assert sorted((d.pid, d.rank, d.code) for d in deaths if isinstance(d, WorkerDeath)) == sorted(
        [(rank0, 0, 3), (rank1, 1, 5)]
    )
    assert events.empty()  # the scheduler (exit 1) is no worker
    assert lines == [f"Worker process {rank0} exit with exception. Error code: 3.\n",
                     f"Worker process {rank1} exit with exception. Error code: 5.\n"]  # fmt: skip
    assert (workers.rank_of(rank0), workers.rank_of(rank1), workers.rank_of(scheduler)) == (0, 1, None)


@pytest.mark.process
def test_a_pid_msrun_names_that_the_watch_never_saw_gets_its_rank_from_its_birth_record(
    standin: Tuple[subprocess.Popen[str], LaunchPlan, List[int]],
) -> None:
    """Reaped before the watch's first look (a loaded machine): msrun's line names the pid, the record its rank."""
    proc, plan, (scheduler, rank0, rank1) = standin
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("\n")
    proc.stdin.flush()
    said = proc.stdout.readline() + proc.stdout.readline()
    _until(lambda: all(proctree.read_info(pid) is None for pid in (scheduler, rank0, rank1)), "msrun to reap them")
    workers, events = _workers(plan, proc)
    try:
        workers.lines(0, said.encode())
        lines = [events.get(timeout=30), events.get(timeout=30)]
    finally:
        workers.stop()
    assert [(line.pid, line.code) for line in lines if isinstance(line, LauncherLine)] == [(rank0, 3), (rank1, 5)]
    assert (workers.rank_of(rank0), workers.rank_of(rank1), workers.rank_of(scheduler)) == (0, 1, None)
    assert workers.pid_ranks() == {}  # the watch saw none of them


@pytest.mark.process
def test_the_watch_of_an_attempt_removes_the_birth_records_of_the_launchers_before(
    standin: Tuple[subprocess.Popen[str], LaunchPlan, List[int]],
) -> None:
    """A long job that restarts many times kept every record (about 150 bytes a process msrun started): the watch
    of a new attempt removes those whose launcher is not one of its own, and its own launcher's stay readable."""
    proc, plan, (scheduler, rank0, rank1) = standin
    assert plan.births is not None
    earlier = subprocess.run(["python", "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                             env={"PATH": plan.processes[0].env["PATH"], "RANK_ID": "9"}, check=True)  # fmt: skip
    before = {int(name.split("-")[0]) for name in os.listdir(plan.births) if name[0].isdigit()}
    assert before == {scheduler, rank0, rank1, int(earlier.stdout)}  # an earlier launcher's (this test's) child
    workers, _events = _workers(plan, proc)
    try:
        after = {int(name.split("-")[0]) for name in os.listdir(plan.births) if name[0].isdigit()}
        assert after == {scheduler, rank0, rank1}
        assert (workers.rank_of(rank0), workers.rank_of(rank1)) == (0, 1)
    finally:
        workers.stop()
