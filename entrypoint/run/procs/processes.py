"""The processes one run started: each with its spec, its Popen, its start time and, once known, its exit.

Every process starts in a session of its own, with ``{**base_env, **defaults, **spec.env}`` (``spec.env_defaults``
only where the environment lacks them) and the job's token; a waiter thread per process posts its
:class:`~..events.ProcExit`. Processes are only ever added (a relaunched process is a new one).
"""


from __future__ import annotations

import subprocess
import threading
import time
from typing import Callable, Dict, List, Mapping, Optional, Set

from ...contract.errors import LaunchError
from ...plan.launch_plan import ProcessSpec
from ..events import Event, ProcExit
from .reaper import TOKEN_VAR

__all__ = ["ProcessGroup"]


class ProcessGroup:
    """The processes of one run, by index (the plan's order, then relaunches)."""

    def __init__(self, base_env: Mapping[str, str], token: str, post: Callable[[Event], None]) -> None:
        self.base_env = base_env
        self.token = token
        self.post = post
        self.specs: List[ProcessSpec] = []
        self.procs: List[subprocess.Popen[bytes]] = []
        self.started: List[float] = []
        self.returncodes: Dict[int, int] = {}
        self.waiters: List[threading.Thread] = []

    def start(self, spec: ProcessSpec) -> Optional[LaunchError]:
        """Start ``spec`` (its waiter comes with :meth:`watch_exit`); the error when it cannot be started."""
        defaults = {k: v for k, v in spec.env_defaults.items() if k not in self.base_env and k not in spec.env}
        env = {**self.base_env, **defaults, **spec.env, TOKEN_VAR: self.token}
        try:
            proc = subprocess.Popen(
                list(spec.argv),
                env=env,
                cwd=spec.cwd or None,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                bufsize=0,
            )
        except OSError as error:
            return LaunchError(
                f"cannot start {spec.name}: {spec.argv[0]!r}: {error.strerror}; "
                "check that the program exists, is executable and is on PATH"
            )
        self.specs.append(spec)
        self.procs.append(proc)
        self.started.append(time.monotonic())
        return None

    def watch_exit(self, index: int) -> None:
        """Start the thread that posts process ``index``'s exit (the zombie keeps it until then)."""
        waiter = threading.Thread(target=self._wait, args=(index, self.procs[index]), name="wait", daemon=True)
        waiter.start()
        self.waiters.append(waiter)

    def _wait(self, index: int, proc: subprocess.Popen[bytes]) -> None:
        code = proc.wait()
        self.post(ProcExit(index, code, time.monotonic()))

    def running(self) -> bool:
        """Whether a process has not been seen to exit yet."""
        return len(self.returncodes) < len(self.procs)

    def pids(self) -> Set[int]:
        """Every pid this run started."""
        return {proc.pid for proc in self.procs}

    def live_groups(self) -> List[int]:
        """The process groups (= pids) of the processes not seen to exit."""
        return [proc.pid for index, proc in enumerate(self.procs) if index not in self.returncodes]

    def reap(self, seconds: float) -> List[int]:
        """Wait up to ``seconds`` for each process; the pids still running after that."""
        left = []
        for proc in self.procs:
            try:
                proc.wait(seconds)
            except subprocess.TimeoutExpired:
                left.append(proc.pid)
        return left

    def join(self, seconds: float) -> None:
        """Let the waiter threads finish."""
        for waiter in self.waiters:
            waiter.join(seconds)
