"""The watchdog starts before the shim plans: it runs before the first rank, knows the job's cgroup from the start,
and a shim SIGKILLed while its watchdog has not read a line yet still leaves nothing behind.

These run where the shim can make a cgroup (CI and this project's machines can).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Tuple

import pytest
from malaunch.entrypoint.run.procs import proctree
from malaunch.entrypoint.run.procs.guards import EarlyGuards, JobGuards
from malaunch.entrypoint.run.procs.reaper import TOKEN_VAR, JobTree, Watchdog, new_token, watchdog_argv
from malaunch.entrypoint.run.procs.watchdog_end import _Told
from shimutil import MARK, SCRIPTS, assert_nothing_left, job_cgroups, marked_env, write_v10_table

JOB = str(SCRIPTS / "rank_job.py")
WATCHDOG = b"malaunch.entrypoint.run.procs.watchdog"  # the module the watchdog's command line imports


def _watchdogs_of(shim: int) -> List[int]:
    """The shim's watchdogs (by their command line, there from the exec)."""
    children = [info.pid for info in proctree.descendants(shim) if info.ppid == shim]
    return [pid for pid in children if WATCHDOG in Path(f"/proc/{pid}/cmdline").read_bytes()]


def _waiting_shim(tmp_path: Path, *args: str) -> Tuple[subprocess.Popen[bytes], str]:
    """A shim waiting for its rank table (2 ranks, not complete yet), past the start of its guards; its mark."""
    write_v10_table(tmp_path / "table.json", servers=1, devices=2, status="initializing")
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_RANK_TABLE_TIMEOUT": "120",
                      "MALAUNCH_GRACE_PERIOD": "1"})  # fmt: skip
    shim = subprocess.Popen([sys.executable, "-m", "malaunch.entrypoint", JOB, *args], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    assert shim.stderr is not None
    while b"rank table" not in shim.stderr.readline():  # it says it waits once its guards are up
        assert shim.poll() is None
    return shim, env[MARK]


@pytest.mark.process
def test_a_shim_has_its_watchdog_before_it_reads_the_rank_table_and_it_removes_the_cgroup_when_the_shim_dies(
    tmp_path: Path,
) -> None:
    shim, _ = _waiting_shim(tmp_path, "--lines", "1")
    try:
        watchdogs = _watchdogs_of(shim.pid)  # the old shim started it after its ranks: none while it waited
        assert len(watchdogs) == 1, watchdogs
        cgroups = job_cgroups(shim.pid)
        assert cgroups  # made and entered before the environment is read
        assert not any(f"/{path.name}" in Path(f"/proc/{watchdogs[0]}/cgroup").read_text() for path in cgroups)
    finally:
        shim.kill()
        shim.wait()
    deadline = time.monotonic() + 30  # no other shim has to end: the watchdog itself removes the cgroup
    while [path for path in cgroups if path.exists()] or proctree.is_alive(watchdogs[0]):
        assert time.monotonic() < deadline, ([path for path in cgroups if path.exists()], watchdogs)
        time.sleep(0.05)


@pytest.mark.process
def test_a_shim_killed_while_its_watchdog_still_boots_leaves_no_process(tmp_path: Path) -> None:
    # the watchdog is held (SIGSTOP) before it can read a line; the ranks start, rank 0 leaves a daemon that only
    # the cgroup can find (its own session, an empty environment); the shim is SIGKILLed; then the watchdog runs
    shim, mark = _waiting_shim(tmp_path, "--lines", "1", "--sleep", "120", "--daemon", str(tmp_path))
    watchdog = 0
    try:
        [watchdog] = _watchdogs_of(shim.pid)
        os.kill(watchdog, signal.SIGSTOP)
        write_v10_table(tmp_path / "complete.json", servers=1, devices=2)
        os.replace(tmp_path / "complete.json", tmp_path / "table.json")
        assert shim.stdout is not None
        while b"line 0" not in shim.stdout.readline():  # the ranks run and the shim's guards are up
            assert shim.poll() is None
        deadline = time.monotonic() + 60
        while not (tmp_path / "daemon.pid").exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        daemon = int((tmp_path / "daemon.pid").read_text())
        assert proctree.is_alive(daemon)
        cgroups = job_cgroups(shim.pid)
        assert cgroups
    finally:
        shim.kill()
        shim.wait()
        if watchdog:
            os.kill(watchdog, signal.SIGCONT)
    assert_nothing_left(mark)
    deadline = time.monotonic() + 30
    while proctree.is_alive(daemon) or [path for path in cgroups if path.exists()]:
        assert time.monotonic() < deadline, (daemon, [path for path in cgroups if path.exists()])
        time.sleep(0.05)


def test_the_guards_tell_a_watchdog_started_before_planning_the_runs_grace() -> None:
    read_fd, write_fd = os.pipe()
    early = EarlyGuards(new_token(), Watchdog(None, write_fd), None)  # a watchdog that is this test's pipe
    guards = JobGuards(JobTree(early.token, ()), 0.5, {}, early)
    try:
        guards.before_start()
        assert os.read(read_fd, 4096) == b"grace 0.5\n"
    finally:
        guards.release(lambda: None)  # the cgroup it made goes; "done" is written and the pipe's end closed
        os.close(read_fd)


def test_the_watchdog_takes_the_grace_it_is_told_in_place_of_its_default() -> None:
    told = _Told(2.0)
    for line in (b"grace 0.25", b"pg 41 9", b"cg /sys/fs/cgroup/malaunch-x", b"proc 42 7", b"grace"):
        told.hear(line.split())
    assert (told.grace, told.groups, told.cgroups, told.procs) == (0.25, [(41, 9)], ["/sys/fs/cgroup/malaunch-x"],
                                                                   {(42, 7)})  # fmt: skip


def _listener(token: str) -> Tuple[subprocess.Popen[bytes], int]:
    """The watchdog program as the shim starts it (grace 1 s), and the write end of its pipe."""
    read_fd, write_fd = os.pipe()
    try:
        watchdog = subprocess.Popen(watchdog_argv(read_fd, token, 1.0), pass_fds=(read_fd,), cwd="/",
                                    stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    finally:
        os.close(read_fd)
    return watchdog, write_fd


def _sleeper(token: str) -> subprocess.Popen[bytes]:
    """A process of the job ``token`` in a group of its own that ignores SIGTERM (only the watchdog's SIGKILL after
    its grace ends it)."""
    return subprocess.Popen([sys.executable, "-c", "import signal, time\nsignal.signal(signal.SIGTERM, "
                             "signal.SIG_IGN)\nprint('up', flush=True)\ntime.sleep(120)"],
                            env=marked_env({TOKEN_VAR: token}), stdout=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip


@pytest.mark.process
def test_the_watchdog_hands_what_it_was_told_to_its_second_stage_when_the_pipe_ends() -> None:
    token = new_token()
    sleeper, (watchdog, write_fd) = _sleeper(token), _listener(token)
    try:
        assert sleeper.stdout is not None and sleeper.stdout.readline() == b"up\n"
        # the lines cut anywhere: a line that two writes make is one announcement
        for part in (b"grace 0.2\npg ", b"%d\n" % sleeper.pid, b"proc %d %d\n" % (sleeper.pid, 1)):
            os.write(write_fd, part)
        os.close(write_fd)  # the shim is gone
        assert sleeper.wait(60) == -signal.SIGKILL  # by the second stage, after the grace it was told
        assert watchdog.wait(60) == 0
    finally:
        sleeper.kill()
        sleeper.wait()
        watchdog.kill()
        watchdog.wait()


@pytest.mark.process
def test_the_watchdog_that_is_told_done_ends_nothing() -> None:
    token = new_token()
    sleeper, (watchdog, write_fd) = _sleeper(token), _listener(token)
    try:
        assert sleeper.stdout is not None and sleeper.stdout.readline() == b"up\n"
        os.write(write_fd, b"pg %d\ndo" % sleeper.pid)
        os.write(write_fd, b"ne\n")
        os.close(write_fd)
        assert watchdog.wait(60) == 0
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()
        watchdog.kill()
        watchdog.wait()
