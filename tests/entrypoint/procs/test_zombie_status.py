"""Reading a zombie's exit status from /proc: how the shim sees an msrun worker die before msrun does; and from
a pidfd once its parent has reaped it (Linux 6.15+), how it still knows a torchrun worker's status then."""

from __future__ import annotations

import os
import platform
import signal
import time
from typing import Tuple

from malaunch.entrypoint.run.procs.proctree import pidfd_exit_status, zombie_returncode


def _zombie(action: str) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        if action == "exit":
            os._exit(7)
        time.sleep(30)
        os._exit(0)
    if action == "kill":
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while zombie_returncode(pid) is None:
        assert time.monotonic() < deadline, "child did not become a zombie"
        time.sleep(0.01)
    return pid


def test_exit_code_and_signal_of_unreaped_children() -> None:
    exited, killed = _zombie("exit"), _zombie("kill")
    try:
        assert zombie_returncode(exited) == 7
        assert zombie_returncode(killed) == -signal.SIGKILL
    finally:
        for pid in (exited, killed):
            os.waitpid(pid, 0)
    assert zombie_returncode(exited) is None  # reaped: gone


def test_a_live_process_is_not_a_zombie() -> None:
    assert zombie_returncode(os.getpid()) is None


def _kernel() -> Tuple[int, ...]:
    return tuple(int(part) for part in platform.release().split("-")[0].split(".")[:2])


def test_the_exit_status_survives_the_reap_through_a_pidfd() -> None:
    results = []
    for action in ("exit", "kill"):
        pid = _zombie(action)
        fd = os.pidfd_open(pid)
        try:
            assert pidfd_exit_status(fd) is None  # a zombie: not reaped yet, /proc has it
            os.waitpid(pid, 0)  # the parent (here: us, for torchrun: torchrun) reaps it
            results.append(pidfd_exit_status(fd))
        finally:
            os.close(fd)
    # PIDFD_INFO_EXIT came with Linux 6.15; before, the status of a reaped worker is unknown (None)
    assert results == ([7, -signal.SIGKILL] if _kernel() >= (6, 15) else [None, None])
