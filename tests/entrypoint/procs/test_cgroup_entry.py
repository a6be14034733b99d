"""The job's cgroup made early: ranks born inside it, the shim and its watchdog outside, nothing left behind.

These run where the shim can make a cgroup (CI and this project's machines can: the daemon test in
test_shim_correctness.py asserts it too).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List, Optional

import pytest
from malaunch.entrypoint.main import main
from malaunch.entrypoint.run.procs import cgroup as _cgroup
from malaunch.entrypoint.run.procs import proctree
from malaunch.entrypoint.run.procs.guards import EarlyGuards, JobGuards
from malaunch.entrypoint.run.procs.reaper import TOKEN_VAR, JobTree, new_token
from shimutil import CGROUP_MOUNTS, MARK, SCRIPTS, assert_nothing_left, job_cgroups, marked_env, write_v10_table

JOB = str(SCRIPTS / "rank_job.py")


WATCHDOG = b"malaunch.entrypoint.run.procs.watchdog"  # the module the watchdog's command line imports


def _job_cgroup_of(pid: int) -> Optional[str]:
    """The ``malaunch-...`` cgroup path (relative to its hierarchy) that ``pid`` is in, if any."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        path = line.split(":", 2)[2]
        if "/malaunch-" in path:
            return path
    return None


def _dirs_of(relative: str) -> List[Path]:
    """Where a cgroup path relative to its hierarchy exists on this host's mounts."""
    return [Path(mount + relative) for mount in CGROUP_MOUNTS if Path(mount + relative).is_dir()]


def _leftovers(pid: int) -> List[Path]:
    """Job cgroups named after the process ``pid`` (the shim's token starts with its pid) that still exist."""
    return sorted(job_cgroups(pid))


@pytest.mark.process
def test_ranks_are_born_in_the_job_cgroup_and_the_shim_and_its_watchdog_stay_outside(tmp_path: Path) -> None:
    write_v10_table(tmp_path / "table.json", servers=1, devices=2)
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_GRACE_PERIOD": "2"})
    proc = subprocess.Popen([sys.executable, "-m", "malaunch.entrypoint", JOB, "--lines", "1", "--sleep", "120"],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        while b"line 0" not in proc.stdout.readline():  # the shim reads output only once its guards are up
            assert proc.poll() is None
        children = [info.pid for info in proctree.descendants(proc.pid) if info.ppid == proc.pid]
        # by its command line, there from its exec: it names itself malaunch-wdog only once its interpreter is up
        watchdogs = [pid for pid in children if WATCHDOG in Path(f"/proc/{pid}/cmdline").read_bytes()]
        ranks = [pid for pid in children if pid not in watchdogs]
        assert len(ranks) == 2 and len(watchdogs) == 1, (ranks, watchdogs)
        cgroups = {_job_cgroup_of(pid) for pid in ranks}
        assert len(cgroups) == 1 and None not in cgroups, cgroups
        job_cgroup = cgroups.pop()
        assert job_cgroup is not None and _dirs_of(job_cgroup)
        assert _job_cgroup_of(proc.pid) is None  # the shim left before it started anything else
        assert _job_cgroup_of(watchdogs[0]) is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 143
    finally:
        proc.kill()
        proc.wait()
    assert_nothing_left(env[MARK])
    assert not _dirs_of(job_cgroup) and not _leftovers(proc.pid)


def test_a_start_that_fails_after_the_cgroup_was_made_leaves_no_cgroup_and_this_process_where_it_was(
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = Path("/proc/self/cgroup").read_text()
    # options parsed, not a dry run: the cgroup is made; then the environment is refused
    code = main(["train.py"], {"MA_NUM_HOSTS": "two"})
    assert code == 2 and "MA_NUM_HOSTS" in capsys.readouterr().err
    assert Path("/proc/self/cgroup").read_text() == before
    deadline = time.monotonic() + 5  # the entry's thread has ended (abandon() joined it)
    while any(thread.name == "malaunch-cgroup-entry" for thread in threading.enumerate()):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not _leftovers(os.getpid())


def _dead_pid() -> int:
    """The pid of a process that has just exited and been reaped (no process has it now)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_cgroup_name_proves_its_owner_gone_only_when_it_is() -> None:
    me = proctree.read_info(os.getpid())
    assert me is not None
    namespace = os.stat("/proc/self/ns/pid").st_ino
    assert _cgroup.cgroup_name(f"{os.getpid()}-ab12") == f"malaunch-{os.getpid()}-ab12-{me.start}-{namespace}"
    assert _cgroup.stray_owner(_cgroup.cgroup_name(f"{os.getpid()}-ab12")) is None  # this live process
    dead = _dead_pid()
    assert _cgroup.stray_owner(f"malaunch-{dead}-ab12-{me.start}-{namespace}") == (dead, me.start)
    # the same pid with another start time is another process: the owner is gone
    assert _cgroup.stray_owner(f"malaunch-{os.getpid()}-ab12-{me.start + 1}-{namespace}") is not None
    assert _cgroup.stray_owner(f"malaunch-{dead}-ab12-{me.start}-{namespace + 1}") is None  # another pid namespace
    assert _cgroup.stray_owner(f"malaunch-{dead}-ab12") is None  # an older shim's name proves nothing
    assert _cgroup.stray_owner(f"malaunch-{dead}-ab12-x-{namespace}") is None


def test_the_sweep_removes_only_empty_cgroups_whose_owner_is_gone() -> None:
    me = proctree.read_info(os.getpid())
    assert me is not None
    namespace = os.stat("/proc/self/ns/pid").st_ino
    live = _cgroup.JobCgroup.create(_cgroup.cgroup_name(f"{os.getpid()}-{os.urandom(4).hex()}"))
    assert live is not None  # this project's machines let the tests make cgroups (see the module docstring)
    dead = _dead_pid()
    stray = _cgroup.JobCgroup.create(f"malaunch-{dead}-{os.urandom(4).hex()}-{me.start}-{namespace}")
    unproven = _cgroup.JobCgroup.create(f"malaunch-{dead}-{os.urandom(4).hex()}")
    assert stray is not None and unproven is not None
    try:
        removed = _cgroup.sweep_strays()
        assert stray.path in removed and not os.path.exists(stray.path)
        assert os.path.isdir(live.path) and live.path not in removed  # its owner (this process) lives
        assert os.path.isdir(unproven.path)  # no start time in its name: not proven gone
    finally:
        for cgroup in (live, stray, unproven):
            cgroup.remove()


@pytest.mark.process
def test_a_cgroup_left_by_a_shim_killed_with_its_watchdog_is_removed_by_the_next_shim(
    tmp_path: Path,
) -> None:
    left = _killed_while_waiting(tmp_path)
    write_v10_table(tmp_path / "table.json", servers=1, devices=2)
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_GRACE_PERIOD": "2"})
    done = subprocess.run([sys.executable, "-m", "malaunch.entrypoint", JOB, "--lines", "1"], env=env,
                          cwd=tmp_path, capture_output=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert not [path for path in left if path.exists()]
    assert_nothing_left(env[MARK])


@pytest.mark.process
def test_a_run_that_fails_before_its_start_leaves_no_cgroup(tmp_path: Path) -> None:
    # the run took the cgroup made early (the shim inside it), then its log folder could not be made
    write_v10_table(tmp_path / "table.json", servers=1, devices=2)
    (tmp_path / "a-file").write_text("")
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"),
                      "MALAUNCH_LOG_DIR": str(tmp_path / "a-file" / "logs")})  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "malaunch.entrypoint", JOB, "--lines", "1"], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3 and "cannot create log directory" in err, err
    assert not _leftovers(proc.pid)
    assert_nothing_left(env[MARK])


def _watchdog_of(shim: int) -> int:
    """The pid of the shim's watchdog (by its command line, there from its exec); the shim starts it before it
    reads its environment."""
    children = [info.pid for info in proctree.descendants(shim) if info.ppid == shim]
    found = [pid for pid in children if WATCHDOG in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(found) == 1, (children, found)
    return found[0]


def _killed_while_waiting(tmp_path: Path) -> List[Path]:
    """Start a shim that waits for a rank table that is not complete (its cgroup made and entered), SIGKILL its
    watchdog (as an OOM killer or a ``kill -9`` of every process could) and then it; the cgroups it left (owner
    gone), found while it lived. Any other shim on this machine that ends meanwhile (another test's, in another
    worker) may sweep them first, as strays; what the caller asserts (they are gone) holds either way, and each
    one still there is empty."""
    write_v10_table(tmp_path / "pending.json", servers=1, devices=2, status="initializing")
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "pending.json"), "MALAUNCH_RANK_TABLE_TIMEOUT": "120"})
    killed = subprocess.Popen([sys.executable, "-m", "malaunch.entrypoint", JOB, "--lines", "1"], env=env,
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)  # fmt: skip
    try:
        assert killed.stderr is not None
        while b"rank table" not in killed.stderr.readline():  # it says it waits once it is past the cgroup
            assert killed.poll() is None
        deadline = time.monotonic() + 30
        while _job_cgroup_of(killed.pid) is None:  # the move in is done
            assert time.monotonic() < deadline
            time.sleep(0.01)
        left = _leftovers(killed.pid)  # found while its owner lives: no sweep takes them yet
        assert left
        os.kill(_watchdog_of(killed.pid), signal.SIGKILL)
    finally:
        killed.kill()
        killed.wait()
    assert not any(_cgroup.members(str(path)) for path in left if path.exists())
    return left


@pytest.mark.process
def test_the_watchdog_that_ends_a_job_removes_the_cgroup_a_dead_shim_left(tmp_path: Path) -> None:
    left = _killed_while_waiting(tmp_path)
    write_v10_table(tmp_path / "table.json", servers=1, devices=2)
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_GRACE_PERIOD": "1"})
    proc = subprocess.Popen([sys.executable, "-m", "malaunch.entrypoint", JOB, "--lines", "1", "--sleep", "120"],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        while b"line 0" not in proc.stdout.readline():  # its watchdog runs
            assert proc.poll() is None
    finally:
        proc.kill()  # its watchdog ends the job, then sweeps
        proc.wait()
    assert_nothing_left(env[MARK])
    deadline = time.monotonic() + 30
    while [path for path in left if path.exists()] or _leftovers(proc.pid):
        assert time.monotonic() < deadline, ([p for p in left if p.exists()], _leftovers(proc.pid))
        time.sleep(0.1)


class _CountingTree(JobTree):
    """The job's tree, counting its searches of every process (:meth:`JobTree.find`)."""

    searches = 0

    def find(self, *, launchers: bool = True) -> List[proctree.ProcKey]:
        self.searches += 1
        return super().find(launchers=launchers)


def _guarded_sleeper(early: Optional[EarlyGuards]) -> _CountingTree:
    """Start a sleeper under a run's guards (set up before planning when ``early`` is given, else at the start),
    as the supervisor does; the job's tree, once the guards were released and the sleeper killed."""
    tree = _CountingTree(early.token if early is not None else new_token(), ())
    guards = JobGuards(tree, 1.0, marked_env({}), early)
    guards.before_start()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env={TOKEN_VAR: tree.token},
                               start_new_session=True)  # fmt: skip
    try:
        sleeper_info = proctree.read_info(sleeper.pid)
        assert sleeper_info is not None
        guards.after_start([proctree.ProcKey(sleeper.pid, sleeper_info.start)])
        assert guards.cgroup is not None  # this project's machines let the tests make cgroups
        assert _job_cgroup_of(sleeper.pid) == "/" + os.path.basename(guards.cgroup.path)
        assert _job_cgroup_of(os.getpid()) is None
    finally:
        sleeper.kill()
        sleeper.wait()
        guards.release(lambda: None)
    return tree


def test_processes_born_in_the_job_cgroup_are_not_searched_for_after_the_start() -> None:
    # born inside: what they fork is inside too; no scan of /proc while the ranks start up (the old code made one)
    assert _guarded_sleeper(EarlyGuards.begin(marked_env({}))).searches == 0


def test_processes_started_outside_the_job_cgroup_are_moved_in_and_what_they_forked_searched_for() -> None:
    assert _guarded_sleeper(None).searches == 1
