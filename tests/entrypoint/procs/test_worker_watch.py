"""The watch takes a launcher's helpers for workers only when it cannot tell them apart.

msrun sets ``MS_NODE_ID``, ``MS_ROLE=MS_WORKER`` and ``RANK_ID`` in its own environment before it starts each
worker (with ``setsid``), so every helper it starts afterwards (the log ``tail``, the ``grep`` it runs over the
scheduler's log when a worker failed) carries the last worker's rank. Taken for a worker, such a helper made the
watch believe it had seen that rank, and the shim could no longer name the worker msrun reported by pid (the
flaky msrun root-cause test). Real processes: a launcher that starts a helper, then a worker.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import time
from typing import Callable, Iterator, List, Tuple

import pytest
from malaunch.entrypoint.launchers.msrun import MsrunLauncher
from malaunch.entrypoint.launchers.torchrun.launcher import TorchrunLauncher
from malaunch.entrypoint.run.launcher import Launcher
from malaunch.entrypoint.run.procs import proctree
from malaunch.entrypoint.run.procs.watch import WorkerDeath, WorkerWatch

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
