"""A local job's network namespaces go with the job, also when nothing of it was left to tear them down.

The job runner deletes its hosts' namespaces when the job ends, and ``stop`` does when the runner is gone. A job
whose every process was SIGKILLed (the runner with its hosts: an OOM kill, ``kill -9`` of the group) left them
behind, and ``delete`` and ``prune`` removed the job's folder, the only record of them: the namespaces stayed
until the machine rebooted. Real parts: the local backend with network namespaces (root, iproute2), a 2-host job.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import List

import pytest
from malaunch.sdk import JobState, spec_from_mapping
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.backends.local.hostnet import NetnsNetwork
from malaunch.sdk.backends.local.jobdir import job_processes
from sdkutil import wait_for

pytestmark = [
    pytest.mark.process,
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2"),
]

SLEEPER = "import time\nprint('ready', flush=True)\ntime.sleep(600)\n"


def _namespaces(job_id: str) -> List[str]:
    short = NetnsNetwork(job_id, 1).short
    folder = Path("/run/netns")
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(f"malaunch-{short}-"))


def _kill_all(job_id: str) -> None:
    """SIGKILL every process of the job (one may end by itself meanwhile: its parent's death ends it)."""
    for pid in job_processes(job_id):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("how", ["delete", "prune"])
def test_the_namespaces_of_a_job_killed_whole_go_when_the_job_is_removed(tmp_path: Path, home: Path, how: str) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "boot.py").write_text(SLEEPER)
    spec = spec_from_mapping({"name": "netns-left", "code_dir": str(code), "boot_file": "boot.py",
                              "resources": {"hosts": 2, "devices_per_host": 1}})  # fmt: skip
    backend = LocalBackend(home=str(home), network="netns")
    handle = backend.submit(spec)
    try:
        wait_for(lambda: sum("ready" in line for line in backend.logs(handle.id)) == 2, 120, "both hosts' ranks")
        assert len(_namespaces(handle.id)) == 3  # each host's and the bridge's
        _kill_all(handle.id)  # the whole job at once: nothing of it can tear anything down
        wait_for(lambda: not job_processes(handle.id), 60, "every process of the job gone")
        wait_for(lambda: backend.status(handle.id).is_terminal or backend.status(handle.id).state is JobState.UNKNOWN,
                 60, "the job seen ended")  # fmt: skip
        assert len(_namespaces(handle.id)) == 3  # left behind, as before
        if how == "delete":
            backend.delete(handle.id)
        else:
            result = backend.prune(0.0)
            assert handle.id in result.deleted, result
        assert _namespaces(handle.id) == []
    finally:
        _kill_all(handle.id)
        for name in _namespaces(handle.id):
            subprocess.run(["ip", "netns", "delete", name], check=False)  # the test's own leftovers
