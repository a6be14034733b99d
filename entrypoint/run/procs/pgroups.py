"""The job's process groups, signalled by their number only while that number is proven theirs.

Every process the shim starts leads a session of its own (``start_new_session``): its group id and its session id
are its pid. What the kernel guarantees about such a number (Linux: pids, group ids and session ids share one
number space, a ``struct pid`` each):

- it is never given to a new process while any process, a zombie too, holds it as its pid, its group id or its
  session id: the number is freed only when the last of them is reaped. So while any member of a group lives,
  its number names that group and no other;
- once the last member is gone the number is free: a new process may get it (pids are handed out in a cycle: once
  the counter has gone round, or sooner where root sets it) and make it a group of its own (``setpgid(0, 0)``,
  ``setsid``), a stranger's;
- a session leader cannot leave its group, and a process enters a session only by being forked inside it
  (``setpgid`` moves a process between groups of its own session only): every member of the job's group ``N``
  is in session ``N`` and was born after its leader.

Hence what proves a group the job's:

- **its leader is still the process the shim started** (pid and the start time the shim read while it was its
  unreaped child), alive or a zombie not reaped: it holds the number, so the number is its group's.
  :func:`signal_led_group` looks, then signals; through a pidfd opened before the look with
  ``PIDFD_SIGNAL_PROCESS_GROUP`` (Linux 6.9+) the kernel names the group by the leader's ``struct pid``, not by
  its number, so a leader reaped after the look leaves no window; on older kernels ``killpg`` follows the look
  (a window of microseconds, which a stranger can only fill if the pid counter goes round inside it);
- **the leader is gone**: the number proves nothing. Its group is signalled by no number; what is left in it is
  signalled one process at a time, by pid and start time, each proven otherwise: in the shim, as a process of the
  run (token, descent, cgroup: :meth:`.reaper.JobTree.signal_groups`); in the watchdog, by :func:`members_of` at its
  first look after the shim's death: a process is taken as a member of the job's leaderless group ``N`` (leader
  started at ``S``) when, in one read of its ``stat``, its group and its session are both ``N`` and it started at or
  after ``S``, and when no process holds pid ``N`` (one that does with another start time proves the number given
  again: nothing of that group is taken). A stranger's group made inside its own session (a shell's job,
  ``setpgid(0, 0)``) is in another session and is never taken. What this cannot tell apart is a stranger that got
  the number after the job's group emptied, made it a session of its own (``setsid``) and whose first process exited
  before the look, leaving members: that needs the pid counter to go round after the group emptied; and only
  processes without the job's token, outside its cgroup and not announced by the shim (``proc``) depend on this
  proof.

Where no leader start time is known (a ``pg`` line without one) nothing is proven: no group, no member.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import time
from typing import Iterable, List

from . import proctree
from .proctree import ProcKey

__all__ = ["PIDFD_SIGNAL_PROCESS_GROUP", "members_of", "signal_led_group", "wait_exited"]

PIDFD_SIGNAL_PROCESS_GROUP = 1 << 2  # linux/pidfd.h (6.9+): signal the pidfd's process group


def signal_led_group(leader: ProcKey, sig: int) -> bool:
    """Send ``sig`` to the process group ``leader`` leads, only while ``leader`` is still that process (same start
    time, alive or an unreaped zombie) and leads it; True when sent (see the module docstring)."""
    fd = proctree.pidfd_open(leader.pid)
    try:
        info = proctree.read_info(leader.pid)
        if info is None or info.start != leader.start or info.pgid != leader.pid:
            return False
        if fd is not None:
            try:
                signal.pidfd_send_signal(fd, sig, None, PIDFD_SIGNAL_PROCESS_GROUP)
                return True
            except OSError as error:
                if error.errno != errno.EINVAL:
                    return False  # the group is empty now (its struct pid names no member), or not ours to signal
        os.killpg(leader.pid, sig)  # no pidfds, or a kernel before 6.9 (EINVAL: no such flag): right after the look
        return True
    except OSError:
        return False
    finally:
        if fd is not None:
            os.close(fd)


def members_of(leaders: Iterable[ProcKey]) -> List[ProcKey]:
    """At one look, the live processes (never a zombie, never this one) proven members of the groups ``leaders``
    lead or led: every member of a group whose leader held its number throughout the look, and the members of a
    group whose leader is gone that the module docstring's proof takes. A leader of unknown start (below 0) proves
    nothing."""
    known = [leader for leader in leaders if leader.start >= 0]
    if not known:
        return []
    look, me = proctree.snapshot(), os.getpid()
    found: List[ProcKey] = []
    for leader in known:
        after = proctree.read_info(leader.pid)  # read after the look: alive then and now, it held the number
        if after is not None and after.start != leader.start:
            continue  # the number was given to another process: its group is a stranger's
        led = after is not None and after.pgid == leader.pid
        for pid, info in look.items():
            if info.pgid != leader.pid or pid == me or info.zombie:
                continue
            if led or (info.session == leader.pid and info.start >= leader.start):
                found.append(ProcKey(pid, info.start))
    return found


def wait_exited(pid: int, seconds: float) -> bool:
    """Wait up to ``seconds`` for this process's child ``pid`` to exit, without reaping it (its zombie keeps its
    number its group's); True once it has exited."""
    fd = proctree.pidfd_open(pid)
    if fd is not None:
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(max(0, int(seconds * 1000))))  # readable once it has exited
        finally:
            os.close(fd)
    deadline = time.monotonic() + seconds
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:
            return True  # reaped already (not by this module's callers, who hold it)
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
