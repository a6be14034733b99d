"""The watchdog waits for the members of the process groups the shim announced, not only for the processes it can
prove by token, announcement or cgroup: a member with none of those that ignores SIGTERM still gets SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from malaunch.entrypoint.run.procs import proctree
from malaunch.entrypoint.run.procs.reaper import new_token, watchdog_argv

# ignores SIGTERM, says so on stdout, then waits to be killed (no token in its environment, no cgroup of the job)
STUBBORN = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
    "while True: time.sleep(60)\n"
)


@pytest.mark.process
def test_a_group_member_without_token_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    member = subprocess.Popen([sys.executable, "-c", STUBBORN], env={"PATH": os.environ.get("PATH", "")},
                              stdout=subprocess.PIPE, start_new_session=True)  # fmt: skip
    watchdog = None
    try:
        assert member.stdout is not None
        assert member.stdout.readline() == b"ready\n"
        read_fd, write_fd = os.pipe()
        try:
            watchdog = subprocess.Popen(watchdog_argv(read_fd, new_token(), 0.2), pass_fds=(read_fd,),
                                        start_new_session=True, stdin=subprocess.DEVNULL)  # fmt: skip
        finally:
            os.close(read_fd)
        start = proctree.read_info(member.pid)  # the test's unreaped child: its number is still its own
        assert start is not None
        os.write(write_fd, b"pg %d %d\ngrace 0.2\n" % (member.pid, start.start))  # the group, its leader's start
        os.close(write_fd)  # the shim is gone: the watchdog ends the job
        assert watchdog.wait(60) == 0
        # the old watchdog found no process by token, announcement or cgroup, so it stopped after the SIGTERM
        assert member.wait(30) == -signal.SIGKILL
        with pytest.raises(ProcessLookupError):  # the group is empty
            os.killpg(member.pid, 0)
    finally:
        for proc in (member, watchdog):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
