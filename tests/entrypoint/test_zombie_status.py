"""Reading a zombie's exit status from /proc: how the shim sees an msrun worker die before msrun does."""

from __future__ import annotations

import os
import signal
import time

from malaunch.entrypoint.proctree import zombie_returncode


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
