"""A job's process group number given to a stranger, run as the first process of a fresh pid namespace
(``unshare --pid --fork --mount-proc``: nothing else takes pids there, and pid reuse can be asked for without
touching the machine's own pid counter).

``group_reuse.py watchdog RECORD``: the watchdog program is started as the shim starts it, told the group of a
process that then exits and is reaped (by :meth:`Watchdog.announce_groups`, as the shim tells it), a stranger
takes that number as a session and group of its own, and the watchdog's pipe ends (the shim is gone).
``group_reuse.py shim RECORD``: the same stranger takes the number of a process the shim's :class:`ProcessGroup`
started and its exit watch reaped (the run's loop has not seen the exit yet), and the shim's final teardown
(:func:`kill_everything`) is given its live groups. Either way the stranger records every signal it gets in RECORD
(the last, SIGWINCH, is the script's own: every signal sent before it is recorded by then); the last line on
stdout is a JSON object: ``taken`` (the stranger got the number), ``alive`` (it is still running at the end),
``watchdog`` (the watchdog's exit status, watchdog mode).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from malaunch.entrypoint.plan.launch_plan import ProcessSpec
from malaunch.entrypoint.run.events import Event, ProcExit
from malaunch.entrypoint.run.procs import proctree
from malaunch.entrypoint.run.procs.processes import ProcessGroup
from malaunch.entrypoint.run.procs.proctree import ProcKey
from malaunch.entrypoint.run.procs.reaper import JobTree, Watchdog, kill_everything, new_token, watchdog_argv

# records each signal it gets (one name a line), says "ready" once its handlers are set, then waits
STRANGER = (
    "import signal, sys\n"
    "def record(number, frame):\n"
    "    with open(sys.argv[1], 'a') as out: out.write(signal.Signals(number).name + '\\n')\n"
    "for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGWINCH):\n"
    "    signal.signal(sig, record)\n"
    "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
    "while True: signal.pause()\n"
)
_TRIES = 50


def _stranger(record: str, number: int, not_start: int) -> Optional[subprocess.Popen[bytes]]:
    """A process whose pid is ``number`` (asked of the pid counter) and whose start time is not ``not_start``
    (else it would pass for the process that had the number), leading a session and group of its own."""
    for _ in range(_TRIES):
        with open("/proc/sys/kernel/ns_last_pid", "w") as counter:
            counter.write(str(number - 1))
        proc = subprocess.Popen([sys.executable, "-c", STRANGER, record], stdout=subprocess.PIPE,
                                start_new_session=True)  # fmt: skip
        info = proctree.read_info(proc.pid)
        if proc.pid == number and info is not None and info.start != not_start:
            assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
            return proc
        proc.kill()
        proc.wait()
    return None


def _settled(stranger: subprocess.Popen[bytes], record: str) -> bool:
    """Whether the stranger is still alive once every signal it got before now is in ``record``: it is sent
    SIGWINCH, which it records after any lower-numbered signal that is pending (Python runs the handlers in the
    signals' order), and waited for until that is recorded or it is dead."""
    if stranger.poll() is not None:
        return False
    os.kill(stranger.pid, signal.SIGWINCH)
    deadline = time.monotonic() + 30.0
    while stranger.poll() is None and time.monotonic() < deadline:
        if os.path.exists(record) and "SIGWINCH" in Path(record).read_text():
            return True
        time.sleep(0.01)
    return stranger.poll() is None


def _reaped_leader(token: str, watchdog: Optional[Watchdog]) -> Tuple[ProcKey, Callable[[], List[ProcKey]]]:
    """A group leader that exited and was reaped, its group empty: its key, and the groups the shim would signal.

    With a ``watchdog``: a child of this script, announced to it as the shim announces the groups it starts.
    Without: a process of the shim's :class:`ProcessGroup`, reaped by its exit watch (whose exit the run's loop has
    not absorbed yet: the group is still among its live ones)."""
    if watchdog is None:
        events: queue.SimpleQueue[Event] = queue.SimpleQueue()
        group = ProcessGroup({"PATH": os.environ.get("PATH", "")}, token, events.put)
        assert group.start(ProcessSpec("leader", (sys.executable, "-c", "pass"), {}, None, os.devnull)) is None
        info = proctree.read_info(group.procs[0].pid)  # not reaped before watch_exit
        assert info is not None
        group.watch_exit(0)
        assert isinstance(events.get(timeout=60), ProcExit)  # posted once reaped
        return ProcKey(info.pid, info.start), group.live_groups
    leader = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                              start_new_session=True)  # fmt: skip
    info = proctree.read_info(leader.pid)  # our unreaped child
    assert info is not None and leader.stdin is not None
    watchdog.announce_groups([ProcKey(leader.pid, info.start)])  # as the shim announces the groups it starts
    watchdog.announce_grace(0.2)
    leader.stdin.close()
    leader.wait()  # the group had no other member: its number is free
    return ProcKey(info.pid, info.start), list


def main(mode: str, record: str) -> Dict[str, object]:
    token = new_token()
    result: Dict[str, object] = {"taken": False, "alive": False}
    watchdog, write_fd = None, -1
    if mode == "watchdog":
        read_fd, write_fd = os.pipe()
        watchdog = Watchdog(subprocess.Popen(watchdog_argv(read_fd, token, 0.2), pass_fds=(read_fd,), cwd="/",
                                             stdin=subprocess.DEVNULL, start_new_session=True), write_fd)  # fmt: skip
        os.close(read_fd)
    key, live_groups = _reaped_leader(token, watchdog)
    stranger = _stranger(record, key.pid, key.start)
    if stranger is None:
        return result
    result["taken"] = True
    try:
        if watchdog is not None and watchdog.proc is not None:
            os.close(write_fd)  # the shim is gone
            result["watchdog"] = watchdog.proc.wait(60)
        else:  # the shim's final teardown of what is left (SIGTERM to the groups, SIGKILL after the grace)
            kill_everything(JobTree(token, [stranger.pid]), live_groups(), 0.2)  # (the stranger: not the run's)
        result["alive"] = _settled(stranger, record)
    finally:
        stranger.kill()
        stranger.wait()
    return result


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
