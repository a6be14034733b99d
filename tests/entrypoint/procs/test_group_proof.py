"""A process group is signalled by its number only while that number is proven the job's: its leader is the process
announced (pid and start time). A number given to a stranger once the job's group emptied is never signalled, by
the watchdog or by the shim; a group whose leader is gone is still ended, one proven member at a time; a group
whose leader lives is ended as before. Damaged announcements never crash the watchdog."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest
from malaunch.entrypoint.run.procs import pgroups, proctree, selfproc
from malaunch.entrypoint.run.procs.reaper import TOKEN_VAR, Watchdog, new_token, watchdog_argv
from malaunch.entrypoint.run.procs.watchdog_end import _Told
from shimutil import SCRIPTS, marked_env

REUSE = str(SCRIPTS / "group_reuse.py")

# a process of the job without token or cgroup: records each SIGTERM it gets (and lives on); as "leader-exit" or
# "leader-stay" it first starts a member in its own group, prints the member's pid once it is ready, and then
# exits or stays
GROUP = (
    "import os, signal, subprocess, sys\n"
    "def record(number, frame):\n"
    "    with open(os.path.join(sys.argv[1], str(os.getpid())), 'a') as out: out.write('SIGTERM\\n')\n"
    "signal.signal(signal.SIGTERM, record)\n"
    "if sys.argv[2] != 'member':\n"
    "    member = subprocess.Popen([sys.executable, '-c', sys.argv[3], sys.argv[1], 'member', sys.argv[3]],\n"
    "                              stdout=subprocess.PIPE)\n"
    "    assert member.stdout.readline() == b'ready\\n'\n"
    "    print(member.pid, flush=True)\n"
    "    if sys.argv[2] == 'leader-exit':\n"
    "        os._exit(0)\n"
    "else:\n"
    "    print('ready', flush=True)\n"
    "while True: signal.pause()\n"
)


def _in_a_fresh_pid_namespace(mode: str, tmp_path: Path) -> Tuple[Dict[str, object], str]:
    """Run ``group_reuse.py MODE`` as the first process of a new pid namespace; its result and what the stranger
    recorded. Skipped where no pid namespace can be made (not root)."""
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"no new pid namespace here (unshare --pid needs root): {probe.stderr.decode().strip()}")
    record = tmp_path / "stranger.signals"
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, REUSE, mode, str(record)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["taken"], "the stranger never got the group's number"
    return result, record.read_text() if record.exists() else ""


@pytest.mark.process
def test_the_watchdog_never_signals_a_group_number_given_to_a_stranger(tmp_path: Path) -> None:
    result, recorded = _in_a_fresh_pid_namespace("watchdog", tmp_path)
    assert result["watchdog"] == 0
    # the old watchdog sent SIGTERM to the stranger's group, then took it as a member and killed it
    assert (result["alive"], recorded) == (True, "SIGWINCH\n")


@pytest.mark.process
def test_the_shim_never_signals_a_reaped_leaders_number_given_to_a_stranger(tmp_path: Path) -> None:
    result, recorded = _in_a_fresh_pid_namespace("shim", tmp_path)
    assert (result["alive"], recorded) == (True, "SIGWINCH\n")


@pytest.fixture
def adopting() -> Iterator[None]:
    """This process is the child subreaper meanwhile: the members a leader leaves behind come to it, and their
    exit statuses can be read."""
    previous = selfproc.set_subreaper()
    if previous is None:
        pytest.skip("no child subreaper here (prctl unavailable)")
    try:
        yield
    finally:
        selfproc.restore_subreaper(previous)


def _group(mode: str, folder: Path) -> Tuple[subprocess.Popen[bytes], int, proctree.ProcKey]:
    """A leader of a group of its own (``mode``) with a member; the member's pid and the leader's key, read while
    the leader is this process's unreaped child."""
    leader = subprocess.Popen([sys.executable, "-c", GROUP, str(folder), mode, GROUP], stdout=subprocess.PIPE,
                              env={"PATH": os.environ.get("PATH", "")}, start_new_session=True)  # fmt: skip
    assert leader.stdout is not None
    member = int(leader.stdout.readline())
    info = proctree.read_info(leader.pid)
    assert info is not None
    return leader, member, proctree.ProcKey(leader.pid, info.start)


def _end_by_the_watchdog(lines: bytes) -> None:
    """The watchdog program as the shim starts it, told ``lines``, then the end of its pipe (the shim is gone);
    returns once it has exited 0."""
    read_fd, write_fd = os.pipe()
    try:
        watchdog = subprocess.Popen(watchdog_argv(read_fd, new_token(), 0.2), pass_fds=(read_fd,), cwd="/",
                                    stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    finally:
        os.close(read_fd)
    try:
        os.write(write_fd, lines)
        os.close(write_fd)
        assert watchdog.wait(60) == 0
    finally:
        if watchdog.poll() is None:
            watchdog.kill()
            watchdog.wait()


def _exit_of(pid: int, seconds: float = 30.0) -> Optional[int]:
    """The exit status (Popen-style) of this process's child ``pid``, waited for up to ``seconds``; None if it is
    still running then (it is killed and reaped)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def _recorded(folder: Path, pids: List[int]) -> List[str]:
    """What each of ``pids`` recorded (the signals it got, one a line)."""
    return [(folder / str(pid)).read_text() if (folder / str(pid)).exists() else "" for pid in pids]


@pytest.mark.process
def test_a_group_whose_leader_is_gone_is_still_ended_sigterm_then_sigkill(tmp_path: Path, adopting: None) -> None:
    leader, member, key = _group("leader-exit", tmp_path)
    assert leader.wait(30) == 0  # reaped: the member alone holds the group's number now
    # announced as the shim announces it (the old watchdog knew no start time: it ignored the line)
    _end_by_the_watchdog(b"pg %d %d\ngrace 0.2\n" % key)
    assert _exit_of(member) == -signal.SIGKILL  # it took the SIGTERM and lived on
    assert _recorded(tmp_path, [member]) == ["SIGTERM\n"]


@pytest.mark.process
def test_a_group_whose_leader_lives_is_ended_as_before(tmp_path: Path, adopting: None) -> None:
    leader, member, key = _group("leader-stay", tmp_path)
    try:
        _end_by_the_watchdog(b"pg %d %d\ngrace 0.2\n" % key)
        assert leader.wait(30) == -signal.SIGKILL
    finally:
        if leader.poll() is None:
            leader.kill()
            leader.wait()
    assert _exit_of(member) == -signal.SIGKILL
    # each got SIGTERM (the member twice: by its group, and as a member taken at the first look) before SIGKILL
    assert [set(text.splitlines()) for text in _recorded(tmp_path, [leader.pid, member])] == [{"SIGTERM"}] * 2


def test_damaged_announcements_are_ignored_and_prove_no_group() -> None:
    told = _Told(2.0)
    for line in (b"pg", b"pg x", b"pg 7 y", b"pg 0 5", b"pg 1 5", b"pg -4 5", b"pg 41", b"pg 42 9", b"proc 3",
                 b"proc x 1", b"grace nan", b"grace inf", b"grace -1", b"grace x", b"cg", b"pg 43 9 9"):  # fmt: skip
        told.hear(line.split())
    # "pg 41" (no start time) is kept, unproven: its leader's start is unknown (-1), so nothing of it is signalled
    assert (told.groups, told.grace, told.procs, told.cgroups) == ([(41, -1), (42, 9)], 2.0, set(), [])


@pytest.mark.process
def test_damaged_lines_never_crash_the_watchdog() -> None:
    token = new_token()
    sleeper = subprocess.Popen([sys.executable, "-c", "import signal, time\nsignal.signal(signal.SIGTERM, "
                                "signal.SIG_IGN)\nprint('up', flush=True)\ntime.sleep(120)"],
                               env=marked_env({TOKEN_VAR: token}), stdout=subprocess.PIPE,
                               start_new_session=True)  # fmt: skip
    read_fd, write_fd = os.pipe()
    try:
        watchdog = subprocess.Popen(watchdog_argv(read_fd, token, 0.2), pass_fds=(read_fd,), cwd="/",
                                    stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    start_new_session=True)  # fmt: skip
    finally:
        os.close(read_fd)
    try:
        assert sleeper.stdout is not None and sleeper.stdout.readline() == b"up\n"
        os.write(write_fd, b"pg x\npg 5 y\nproc 1\nproc a b\ngrace nan\ngrace 0.2\ngrace -1\npg\n\n\xff\xfe\n")
        os.close(write_fd)  # the shim is gone
        # the old watchdog's second stage died of the first line (a traceback), and the job's process lived on
        assert sleeper.wait(60) == -signal.SIGKILL
        assert watchdog.wait(60) == 0
        assert watchdog.stderr is not None and watchdog.stderr.read() == b""
    finally:
        for proc in (sleeper, watchdog):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_the_shim_announces_each_group_with_its_leaders_start_time() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                             start_new_session=True)  # fmt: skip
    read_fd, write_fd = os.pipe()
    try:
        info = proctree.read_info(child.pid)
        assert info is not None
        # a leader whose start time could not be read (-1) proves nothing: it is not announced
        Watchdog(None, write_fd).announce_groups([proctree.ProcKey(child.pid, info.start), proctree.ProcKey(1, -1)])
        assert os.read(read_fd, 4096) == b"pg %d %d\n" % (child.pid, info.start)
    finally:
        os.close(read_fd)
        os.close(write_fd)
        assert child.stdin is not None
        child.stdin.close()
        child.wait()


@pytest.fixture(params=["pidfd", "no pidfd"])
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """With pidfds as this kernel has them, and as a kernel without them (before Linux 5.3) would answer."""
    if request.param == "no pidfd":
        monkeypatch.setattr(proctree, "pidfd_open", lambda pid: None)
    return str(request.param)


@pytest.mark.process
def test_a_led_group_gets_the_signal_while_its_leader_is_the_one_started(tmp_path: Path, adopting: None,
                                                                          kernel: str) -> None:  # fmt: skip
    leader, member, key = _group("leader-stay", tmp_path)
    try:
        assert not pgroups.signal_led_group(proctree.ProcKey(key.pid, key.start + 1), signal.SIGTERM)  # not it
        assert pgroups.signal_led_group(key, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while _recorded(tmp_path, [leader.pid, member]) != ["SIGTERM\n"] * 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _recorded(tmp_path, [leader.pid, member]) == ["SIGTERM\n"] * 2  # the leader and its member, once
        assert pgroups.signal_led_group(key, signal.SIGKILL)
        assert leader.wait(30) == -signal.SIGKILL
        assert _exit_of(member) == -signal.SIGKILL
        assert not pgroups.signal_led_group(key, signal.SIGKILL)  # reaped: its number proves nothing any more
    finally:
        if leader.poll() is None:
            leader.kill()
            leader.wait()


@pytest.mark.process
def test_a_prepare_steps_leader_is_waited_for_without_being_reaped(kernel: str) -> None:
    # the prepare steps' ending sends its SIGKILL to the step's group while the leader's zombie holds the number
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                             start_new_session=True)  # fmt: skip
    try:
        assert not pgroups.wait_exited(child.pid, 0.05)  # still running
        child.kill()
        assert pgroups.wait_exited(child.pid, 30)
        info = proctree.read_info(child.pid)
        assert info is not None and info.zombie and child.returncode is None  # not reaped: its number is held
    finally:
        child.kill()
        assert child.wait() == -signal.SIGKILL
