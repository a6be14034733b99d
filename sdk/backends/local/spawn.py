"""Starting a local job's detached processes: the job's runner (by the backend and the queue's scheduler) and
each host's shim (by the runner).

Each is started the one way (:func:`start_detached`): in its own session, with no terminal and no stdin, its
output appended to its log, so the process that started it can die without harming it.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from typing import Mapping, Sequence

from malaunch.entrypoint.public import Name

from .jobdir import JobPaths, job_processes, kill_processes

__all__ = ["RUNNER_MODULE", "end_runner", "spawn_runner", "start_detached"]

RUNNER_MODULE = "malaunch.sdk.backends.local.runner"


def start_detached(argv: Sequence[str], env: Mapping[str, str], cwd: str, log_path: str) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session, stdin closed, stdout and stderr appended to ``log_path``.

    Raises:
        OSError: the log cannot be opened or the program cannot be started.
    """
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def spawn_runner(paths: JobPaths, environ: Mapping[str, str], secret: str) -> subprocess.Popen[bytes]:
    """Start the job's detached runner with ``environ`` (the job id and ``secret`` added; the secret is in its
    environment only, never in a file) and record its pid. When its pid cannot be recorded (a full disk, a
    Ctrl-C), the runner and whatever it started are killed and the runner reaped before the error goes on: the
    caller never got the process, so it could not undo it."""
    env = {**environ, "MALAUNCH_JOB_ID": paths.job_id, Name.MALAUNCH_JOB_SECRET: secret}
    proc = start_detached([sys.executable, "-m", RUNNER_MODULE, paths.job_dir], env, paths.job_dir, paths.runner_log)
    try:
        with open(paths.runner_pid_file, "w", encoding="utf-8") as handle:
            handle.write(f"{proc.pid}\n")
    except BaseException:
        end_runner(proc, paths.job_id)
        raise
    return proc


def end_runner(proc: subprocess.Popen[bytes], job_id: str) -> None:
    """Kill and reap runner ``proc`` (our unreaped child, so its pid is still its own), then whatever of the job
    it started (proven by job id)."""
    with contextlib.suppress(OSError):
        proc.kill()
    proc.wait()
    kill_processes(lambda: job_processes(job_id), grace=0.0, job_id=job_id)
