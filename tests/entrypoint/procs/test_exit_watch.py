"""How a run learns that its processes exited: one thread polls their pidfds and posts each exit with its code."""

from __future__ import annotations

import os
import queue
import sys
import threading
from typing import Dict, List, Tuple

import pytest
from malaunch.entrypoint.plan.launch_plan import ProcessSpec
from malaunch.entrypoint.run.events import Event, ProcExit
from malaunch.entrypoint.run.procs import proctree
from malaunch.entrypoint.run.procs.processes import ProcessGroup

_EXIT = "import sys; sys.exit(int(sys.argv[1]))"


def _spec(code: int) -> ProcessSpec:
    """A process that exits ``code``."""
    return ProcessSpec(name=f"p{code}", argv=(sys.executable, "-c", _EXIT, str(code)), env={}, cwd=None,
                       log_file="", rank=code, local_rank=code)  # fmt: skip


def _exits(events: queue.SimpleQueue[Event], count: int) -> Dict[int, int]:
    found: Dict[int, int] = {}
    while len(found) < count:
        event = events.get(timeout=30)
        assert isinstance(event, ProcExit)
        assert event.index not in found, f"exit of process {event.index} posted twice"
        found[event.index] = event.code
    return found


def _group() -> Tuple[ProcessGroup, queue.SimpleQueue[Event]]:
    events: queue.SimpleQueue[Event] = queue.SimpleQueue()
    return ProcessGroup({"PATH": "/usr/bin:/bin"}, "token", events.put), events


def _waiters() -> List[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "wait"]


def test_one_thread_posts_every_exit_and_a_later_process_starts_it_again() -> None:
    pidfd = proctree.pidfd_open(os.getpid())
    if pidfd is None:
        pytest.skip("no pidfds here (Linux < 5.3): a thread per process waits, the test below")
    os.close(pidfd)
    group, events = _group()
    before = len(_waiters())
    for code in (3, 0, 5):
        assert group.start(_spec(code)) is None
    for index in range(3):
        group.watch_exit(index)
    assert len(_waiters()) - before <= 1  # one thread for the three, not one each
    assert _exits(events, 3) == {0: 3, 1: 0, 2: 5}
    group.join(10)
    assert group.exits.thread is not None and not group.exits.thread.is_alive()  # nothing left: it ended
    assert group.start(_spec(7)) is None  # a relaunch, after the thread ended
    group.watch_exit(3)
    assert _exits(events, 1) == {3: 7}
    group.join(10)
    assert [proc.returncode for proc in group.procs] == [3, 0, 5, 7]


def test_without_pidfds_a_thread_per_process_posts_its_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proctree, "pidfd_open", lambda pid: None)
    group, events = _group()
    for code in (2, 4):
        assert group.start(_spec(code)) is None
    for index in range(2):
        group.watch_exit(index)
    assert _exits(events, 2) == {0: 2, 1: 4}
    group.join(10)
    assert len(group.waiters) == 2 and group.exits.thread is None
