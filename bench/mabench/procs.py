"""Process plumbing for the benchmark: marked environments, free ports, exact exit times, and a clean slate.

Every process a measurement starts inherits ``LAUNCHBENCH_MARK=<unique id>`` (a name no launcher strips), so
:func:`kill_marked` can find and end all of them afterwards, including msrun's workers and torchrun's, which
live in sessions of their own. Launchers are started with ``start_new_session=True`` and their whole process
group is SIGKILLed as a safety net.

Time is ``time.monotonic()`` everywhere: on Linux it is one system-wide clock (``CLOCK_MONOTONIC``), so a
timestamp written by a worker and one read here are directly comparable.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from malaunch.entrypoint.run.procs import proctree

__all__ = [
    "BENCH_DIR",
    "MARK_VAR",
    "PYTHON",
    "REPO",
    "WORKERS",
    "BenchError",
    "Run",
    "bench_env",
    "free_port",
    "kill_marked",
    "marked_pids",
    "new_mark",
    "read_stamps",
    "scratch_dir",
    "start",
    "tail",
    "timed_process",
]

BENCH_DIR = Path(__file__).resolve().parent.parent
REPO = BENCH_DIR.parent
WORKERS = BENCH_DIR / "workers"
PYTHON = sys.executable
MARK_VAR = "LAUNCHBENCH_MARK"
# Variables of the platform contract and of the launchers that must not leak in from the caller's shell.
_STRIP_PREFIXES = ("MA_", "VC_", "MALAUNCH_", "TORCHELASTIC_", "MS_", "PET_")
_STRIP_NAMES = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK_ID",
    "RANK_SIZE",
    "DEVICE_ID",
    "ASCEND_DEVICE_ID",
    "RANK_TABLE_FILE",
    "MSRUN_CLUSTER_TIME_OUT",
)


class BenchError(Exception):
    """A measurement could not be taken: says what was being measured, what happened, and where to look."""


def free_port() -> int:
    """A TCP port that was free a moment ago (bind port 0 on the loopback and read what the kernel gave)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bench_env(mark: str, extra: Mapping[str, str]) -> Dict[str, str]:
    """The caller's environment without platform/launcher variables, the venv first on PATH, the marker, ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(_STRIP_PREFIXES) and key not in _STRIP_NAMES
    }
    env["PATH"] = os.path.dirname(PYTHON) + os.pathsep + env.get("PATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env[MARK_VAR] = mark
    env.update(extra)
    return env


def marked_pids(mark: str) -> List[int]:
    """Live (non-zombie) processes whose environment holds ``LAUNCHBENCH_MARK=mark`` (a scan of /proc)."""
    return sorted(key.pid for key in proctree.pids_with_env(MARK_VAR, mark))


def kill_marked(mark: str, within: float = 20.0) -> int:
    """SIGKILL every marked process until none is left (or ``within`` seconds pass); returns how many were hit."""
    hit: set[int] = set()
    deadline = time.monotonic() + within
    while True:
        left = proctree.pids_with_env(MARK_VAR, mark)
        if not left:
            return len(hit)
        if time.monotonic() > deadline:
            raise BenchError(f"processes marked {MARK_VAR}={mark} survive SIGKILL: {left}; end them by hand")
        for key in left:
            hit.add(key.pid)
            proctree.signal_proven(key, signal.SIGKILL)
        time.sleep(0.05)


def tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a (log) file, for error messages; empty if it does not exist."""
    try:
        text = path.read_bytes()[-20000:].decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def scratch_dir(tag: str) -> Path:
    """A fresh private directory for one measurement (the caller removes it)."""
    return Path(tempfile.mkdtemp(prefix=f"launchbench-{tag}-"))


def read_stamps(directory: Path, prefix: str) -> List[float]:
    """Timestamps written by workers as ``<directory>/<prefix>-*`` files (each holds one float)."""
    stamps = []
    for path in directory.glob(f"{prefix}-*"):
        if path.suffix == ".tmp":
            continue
        stamps.append(float(path.read_text()))
    return stamps


@dataclass
class Run:
    """A launched process (its own session) and what is known about its exit."""

    label: str
    proc: subprocess.Popen[bytes]
    mark: str
    started: float  # monotonic, taken right before Popen
    stderr_path: Optional[Path]
    exited: Optional[float] = None
    timed_out: bool = field(default=False)
    peak_rss: Optional[float] = None  # MB, the process's own ru_maxrss (from wait4), once it has exited
    #: Seconds of CPU (user + sys, from wait4) of the process and of every child it waited for, once it has exited
    cpu: Optional[float] = None

    def wait_exit(self, deadline: float) -> float:
        """Block in wait4 (no polling, so the exit time is exact) with a watchdog that kills after ``deadline`` s.

        Returns the monotonic time the process was seen to exit; :attr:`peak_rss` is then the process's own peak
        resident memory (not its children's). Raises BenchError if the watchdog fired.
        """

        def kill() -> None:
            self.timed_out = True
            self.kill_group()
            kill_marked(self.mark)

        watchdog = threading.Timer(deadline, kill)
        watchdog.daemon = True
        watchdog.start()
        try:
            _pid, status, usage = os.wait4(self.proc.pid, 0)
            self.exited = time.monotonic()
            self.proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
            self.peak_rss = usage.ru_maxrss / 1024.0  # Linux reports KiB
            self.cpu = usage.ru_utime + usage.ru_stime
        finally:
            watchdog.cancel()
        if self.timed_out:
            raise BenchError(
                f"{self.label}: still running after {deadline:.0f}s, killed it; stderr ends with:\n"
                + (tail(self.stderr_path) if self.stderr_path else "(not kept)")
            )
        return self.exited

    def kill_group(self) -> None:
        """SIGKILL the launcher's whole process group (it is the group leader)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def cleanup(self) -> int:
        """Kill the group and every marked process, reap the launcher; returns how many marked processes were hit."""
        self.kill_group()
        hit = kill_marked(self.mark)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return hit


def start(
    label: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    *,
    stdout: Optional[Path] = None,
    stderr: Optional[Path] = None,
) -> Run:
    """Start ``argv`` in a new session with stdin from /dev/null; output to the given files or /dev/null."""
    out = open(stdout, "wb") if stdout else subprocess.DEVNULL  # noqa: SIM115 - closed right after Popen
    err = open(stderr, "wb") if stderr else subprocess.DEVNULL  # noqa: SIM115
    mark = env[MARK_VAR]
    try:
        began = time.monotonic()
        proc = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=str(cwd),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    finally:
        for handle in (out, err):
            if not isinstance(handle, int):
                handle.close()
    return Run(label=label, proc=proc, mark=mark, started=began, stderr_path=stderr)


def timed_process(argv: Sequence[str], env: Mapping[str, str], timeout: float = 60.0) -> Tuple[float, float, int, str]:
    """``(wall seconds, CPU seconds, exit code, the end of its stderr)`` of one whole process; stdout is thrown away.

    The wait is one blocking ``wait4`` (which also gives this child's own CPU time): ``subprocess.run(timeout=...)``
    without pipes polls with sleeps that grow to 50 ms, so every wall time it gives rounds up to 63.5, 113.5,
    163.5 ms... stderr goes to a temporary file, which never fills as a pipe would. A process still running after
    ``timeout`` seconds is killed (its exit code is then the signal's).
    """
    with tempfile.TemporaryFile() as err:
        began = time.perf_counter()
        proc = subprocess.Popen(list(argv), env=dict(env), stdout=subprocess.DEVNULL, stderr=err)
        watchdog = threading.Timer(timeout, proc.kill)
        watchdog.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            watchdog.cancel()
        wall = time.perf_counter() - began
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        err.seek(max(0, os.fstat(err.fileno()).st_size - 400))
        return wall, usage.ru_utime + usage.ru_stime, proc.returncode, err.read().decode(errors="replace")


def new_mark() -> str:
    """A unique marker value for one measurement."""
    return uuid.uuid4().hex
