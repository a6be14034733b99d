"""Helpers for the SDK tests: job folders, running ``ma-submit`` for real, and the check every process test
ends with: nothing of the job is left running."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import yaml
from malaunch.sdk.backends.local.jobdir import JobPaths, job_processes
from malaunch.sdk.backends.local.state import StateWriter, read_state

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "templates"
VENV_BIN = os.path.dirname(sys.executable)
CLI_TIMEOUT = 240.0


def write_job(folder: Path, script: str, name: str = "job", **fields: Any) -> Path:
    """A job folder with ``boot.py`` (``script``, dedented) and ``job.yaml`` (``fields`` + defaults)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "boot.py").write_text(textwrap.dedent(script))
    data: Dict[str, Any] = {"name": name, "code_dir": ".", "boot_file": "boot.py"}
    data.update(fields)
    job = folder / "job.yaml"
    job.write_text(yaml.safe_dump(data))
    return job


def cli_environ(home: Path) -> Dict[str, str]:
    """Environment for ``ma-submit`` subprocesses on the jobs of ``home``: the suite's own (no ``MA_``, ``VC_`` or
    ``MALAUNCH_`` variable but the local queue's capacity), the venv first on PATH, unbuffered output (the
    ``cli_env`` fixture's, for a home a fixture of wider scope makes)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MA_", "VC_", "MALAUNCH_"))}
    env["MALAUNCH_LOCAL_CAPACITY"] = os.environ.get("MALAUNCH_LOCAL_CAPACITY", "256")  # the queue: see tests/conftest
    env["MALAUNCH_HOME"] = str(home)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def ma_submit(
    args: List[str], env: Dict[str, str], timeout: float = CLI_TIMEOUT, cwd: Optional[str] = None
) -> subprocess.CompletedProcess[str]:
    """Run the real ``ma-submit`` console script (in the repository, or in ``cwd``)."""
    return subprocess.run(
        [os.path.join(VENV_BIN, "ma-submit"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        cwd=cwd or str(REPO),
    )


def wait_for(predicate: Any, timeout: float = 60.0, what: str = "condition") -> None:
    """Poll ``predicate`` until true; a generous deadline only to avoid hanging."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def assert_nothing_running(job_id: str, processes: bool = True) -> None:
    """No live process carries the job's id, and no network namespace of it is left. ``processes=False`` skips the
    look at every process (the caller has just seen none carry the id)."""
    left = job_processes(job_id) if processes else []
    assert left == [], f"job {job_id} left processes running: {left}"
    netns = Path("/run/netns")
    if netns.is_dir():
        from malaunch.sdk.backends.local.hostnet import NetnsNetwork

        short = NetnsNetwork(job_id, 1).short
        assert not [p.name for p in netns.iterdir() if p.name.startswith(f"malaunch-{short}-")]


def job_ids(home: Path) -> List[str]:
    """Ids of the jobs under ``home``."""
    root = home / "jobs"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []



class RecordedRuns:
    """``ma-submit ARGS`` runs with one environment, every stdout and stderr kept in ``outputs`` (the tests that
    prove a secret is never printed grep them all)."""

    def __init__(self, env: Dict[str, str]) -> None:
        self.env = env
        self.outputs: List[str] = []

    def __call__(self, args: List[str]) -> subprocess.CompletedProcess[str]:
        result = ma_submit(args, self.env)
        self.outputs.extend([result.stdout, result.stderr])
        return result


def copy_job(home: Path, job_id: str, new_id: str, **changes: Any) -> None:
    """A copy of an ended local job's folder as job ``new_id``, its state changed by ``changes`` (how a test makes
    many jobs, as the issue of the 10,000-job home made them)."""
    shutil.copytree(home / "jobs" / job_id, home / "jobs" / new_id)
    paths = JobPaths(str(home), new_id)
    state = read_state(paths.state_file).data
    assert state is not None
    state.update(job_id=new_id, **changes)
    assert StateWriter(paths).save(state)


def interrupted(args: List[str], env: Dict[str, str], begun: Callable[[int], bool]) -> Tuple[int, str, str]:
    """``ma-submit ARGS`` as a real process, given a Ctrl-C (SIGINT) once ``begun(pid)``: its code, stdout, stderr."""
    proc = subprocess.Popen([os.path.join(VENV_BIN, "ma-submit"), *args], env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(lambda: begun(proc.pid), what=f"'ma-submit {' '.join(args)}' to begin")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    return proc.returncode, out, err
