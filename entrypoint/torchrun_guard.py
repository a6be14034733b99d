"""Apply ``restart_on`` to torchrun's own restarts: end the job on a failure a restart cannot help with.

Under torchrun the group restarts are torchrun's (``--max_restarts``), and torchrun restarts on any failure.
Before it restarts, torchrun logs each failed worker on its own output, which the supervisor keeps in
``torchrun.log``::

    ... torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 2) local_rank: 0 (pid: 23784) of
    binary: /usr/bin/python

:class:`TorchrunGuard` follows that file while ``run_plan`` runs. When a worker's failure is not one
``restart_on`` accepts (by default: not retryable, e.g. exit 2 from the script), it stops the run the way the
supervisor's contract allows, with SIGTERM to the shim itself, usually before torchrun's next attempt has
started, and reports that worker as the root cause with its own exit code. torchrun's shutdown of the other
workers and its rendezvous take far longer than the guard's 50 ms poll, but this is a race, not a guarantee:
a new attempt may have started and is then torn down with everything else.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections import deque
from typing import Callable, Mapping, Optional, Tuple

from .failure_class import Classification, classify_failure
from .plan import LaunchPlan
from .report import Failure, RunResult

__all__ = ["TorchrunGuard", "parse_worker_failures"]

AcceptFunction = Callable[[Classification, int], bool]
RunFunction = Callable[[LaunchPlan, Mapping[str, str]], RunResult]

_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)")
_POLL = 0.05
_TAIL = 50


def parse_worker_failures(text: str) -> Tuple[Tuple[int, int, int], ...]:
    """``(exitcode, local_rank, pid)`` of every "failed (exitcode: N) local_rank: L (pid: P)" line in ``text``."""
    return tuple((int(m.group(1)), int(m.group(2)), int(m.group(3))) for m in _FAILED.finditer(text))


def _tail(path: str) -> Tuple[str, ...]:
    try:
        with open(path, "rb") as handle:
            lines = deque(handle, maxlen=_TAIL)
    except OSError:
        return ()
    return tuple(raw.rstrip(b"\r\n").decode("utf-8", errors="replace") for raw in lines)


class TorchrunGuard:
    """Watches one torchrun run; ``tripped`` holds the failure that made it stop the run."""

    def __init__(self, plan: LaunchPlan, accept: AcceptFunction) -> None:
        self.plan = plan
        self.accept = accept
        self.tripped: Optional[Failure] = None
        self.stop = threading.Event()
        self.offset = 0
        self.pending = ""

    def _failure(self, code: int, local_rank: int, pid: int) -> Failure:
        ranks = sorted(self.plan.rank_logs)
        rank = ranks[local_rank] if local_rank < len(ranks) else None
        log_file = self.plan.rank_logs.get(rank, "") if rank is not None else self.plan.processes[0].log_file
        shell, sig = (128 - code, -code) if code < 0 else (code, None)
        return Failure(f"rank-{rank}", rank, local_rank, self.plan.host, pid, shell, sig, log_file, _tail(log_file))

    def _read_new(self) -> str:
        try:
            with open(self.plan.processes[0].log_file, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return ""
        self.offset += len(data)
        text = self.pending + data.decode("utf-8", errors="replace")
        complete, _, self.pending = text.rpartition("\n")
        return complete

    def _watch(self) -> None:
        while not self.stop.wait(_POLL):
            for code, local_rank, pid in parse_worker_failures(self._read_new()):
                failure = self._failure(code, local_rank, pid)
                kind = classify_failure(failure.exit_code, failure.tail, signal=failure.signal)
                if not self.accept(kind, failure.exit_code):
                    self.tripped = failure
                    os.kill(os.getpid(), signal.SIGTERM)  # run_plan's contract: SIGTERM tears the job down
                    return

    def run(self, run: RunFunction, plan: LaunchPlan, env: Mapping[str, str]) -> RunResult:
        """``run(plan, env)`` under the guard; a tripped guard's failure replaces the "stopped" result."""
        started = time.monotonic()
        thread = threading.Thread(target=self._watch, name="torchrun-guard", daemon=True)
        thread.start()
        try:
            result = run(plan, env)
        finally:
            self.stop.set()
            thread.join(5.0)
        if self.tripped is None:
            return result
        return RunResult(self.tripped.exit_code, self.tripped, None, time.monotonic() - started)

