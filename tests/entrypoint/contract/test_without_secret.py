"""The job's secret (``MALAUNCH_JOB_SECRET``) is the shims' alone: one function takes it out of every environment
the shim gives a process of its own (ranks, watchdog, notification commands, the webhook program)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Dict, List

from malaunch.entrypoint.contract.variables import without_secret
from malaunch.entrypoint.run.notifier import Notifier
from malaunch.entrypoint.run.procs.guards import EarlyGuards

SECRET = "job-secret-0123456789"


def test_without_secret_drops_the_secret_alone_and_leaves_the_given_mapping_as_it_was() -> None:
    given = {"MALAUNCH_JOB_SECRET": SECRET, "PATH": "/bin", "MA_NUM_HOSTS": "2"}
    assert without_secret(given) == {"PATH": "/bin", "MA_NUM_HOSTS": "2"}
    assert given["MALAUNCH_JOB_SECRET"] == SECRET
    plain = {"PATH": "/bin"}
    assert without_secret(plain) is plain  # nothing to take out: no copy


def _environ(pid: int) -> Dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in os.fsdecode(raw).split("\0") if "=" in item)


def test_the_watchdog_started_before_planning_does_not_get_the_secret() -> None:
    guards = EarlyGuards.begin({**os.environ, "MALAUNCH_JOB_SECRET": SECRET, "SEEN_BY_WATCHDOG": "yes"})
    try:
        proc = guards.watchdog.proc
        assert proc is not None
        env = _environ(proc.pid)
        assert env.get("SEEN_BY_WATCHDOG") == "yes"
        assert "MALAUNCH_JOB_SECRET" not in env
    finally:
        guards.abandon()


def test_a_notification_command_gets_the_event_but_not_the_secret(tmp_path: Path) -> None:
    seen = tmp_path / "env.txt"
    command = [sys.executable, "-c", "import os, sys; open(sys.argv[1], 'w').write(repr(sorted(os.environ)))",
               str(seen)]  # fmt: skip
    said: List[str] = []
    notifier = Notifier({"job": "j"}, 20.0, [{"command": command, "events": ["succeeded"]}],
                        {**os.environ, "MALAUNCH_JOB_SECRET": SECRET}, said.append)  # fmt: skip
    notifier.send("succeeded", 0, exit_code=0)
    notifier.wait()
    names = seen.read_text()
    assert "'MALAUNCH_EVENT'" in names
    assert "MALAUNCH_JOB_SECRET" not in names, names
    assert said == []
