"""Reaping the orphans that come to the shim as subreaper: which children are reaped, and how they are found."""

from __future__ import annotations

import contextlib
import os
import time
from typing import List

import pytest
from malaunch.entrypoint.run.procs import proctree


def _dead_children(count: int) -> List[int]:
    """``count`` children that exit at once, each waited for until it is a zombie."""
    pids = []
    for code in range(count):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            os._exit(code + 3)
        pids.append(pid)
    deadline = time.monotonic() + 10
    for pid in pids:
        while proctree.zombie_returncode(pid) is None:
            assert time.monotonic() < deadline, f"child {pid} did not become a zombie"
            time.sleep(0.01)
    return pids


def _reap_checked() -> None:
    orphan, kept = _dead_children(2)
    try:
        assert proctree.reap_zombie_children(keep={kept}) == [orphan]
        assert proctree.zombie_returncode(orphan) is None  # reaped: gone
        assert proctree.zombie_returncode(kept) == 4  # another waiter's: left as it is
    finally:
        for pid in (orphan, kept):
            with contextlib.suppress(ChildProcessError):  # the orphan was reaped above
                os.waitpid(pid, 0)


def test_dead_children_are_reaped_from_the_kernels_list_without_a_scan_of_every_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if proctree.listed_children() is None:
        pytest.skip("this kernel keeps no /proc children list (CONFIG_PROC_CHILDREN): the scan below is its way")

    def scan() -> List[int]:
        raise AssertionError("every process's /proc was scanned for the shim's own children")

    monkeypatch.setattr(proctree, "all_pids", scan)
    _reap_checked()


def test_without_the_kernels_list_every_process_is_looked_at(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proctree, "listed_children", lambda: None)
    _reap_checked()


def test_the_kernels_list_names_running_and_dead_children() -> None:
    dead = _dead_children(1)[0]
    try:
        listed = proctree.listed_children()
        assert listed is None or dead in listed
    finally:
        os.waitpid(dead, 0)
