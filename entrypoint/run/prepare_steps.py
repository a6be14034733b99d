"""The prepare steps: the commands a host runs, in order, before it takes part in an attempt (``MALAUNCH_PREPARE``).

:func:`run_prepare` runs ``plan.prepare``'s steps one after the other, each in a process group and session of its
own, with the shim's environment (the ranks' one) and the job's token (:data:`~.procs.reaper.TOKEN_VAR`: its
descendants are the job's). Their stdout and stderr go to the console through the ranks' console writer
(:class:`~.output.console.Console`, one ``[prepare] `` prefix a line) and, raw, to ``<log dir>/prepare.log``.
``<log dir>/prepare.json`` says which step runs since when, and how the steps ended (:mod:`.prepare_status`;
``ma-submit status`` shows it). The steps end:

- all with 0: :attr:`PrepareEnd.failure` is None;
- a step with another code, killed by a signal, or one that cannot be started: the others do not run, and
  :attr:`PrepareEnd.failure` names the host, the step (its number and argv), its code or signal, its log and
  its output's tail, whose last line is the shim's (class ``prepare_failed``, :mod:`..report.failure_class`);
- after ``plan.prepare.timeout`` seconds for all of them together: the running step's whole process group
  (proven the job's: its leader is this shim's child, not reaped yet) gets SIGTERM, then SIGKILL after the grace
  period, and the failure says the step timed out (exit code 124, as GNU ``timeout`` says it);
- a stop signal to the shim (``stopped``), or the job ended elsewhere (``cancelled``: the coordinator finished
  it): the running step's group is ended the same way, and :attr:`PrepareEnd.stopped` or ``.cancelled`` says so.

Who runs them and what the job does with their end is the attempt loop's (:mod:`.attempts`,
:mod:`.hosts.jobloop`); restarts never run them again: a failed step ends the job (docs/recovery.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from typing import BinaryIO, Callable, Mapping, NamedTuple, Optional, Tuple

from ..contract.prepare_steps import PrepareSteps, step_text
from ..plan.launch_plan import LaunchPlan
from ..report.report import Failure, RunResult
from .output.console import Console, consoles
from .output.pump import LineStream, pump
from .output.sink import Sink
from .prepare_status import PREPARE_FILE, note_prepare
from .procs.pgroups import wait_exited
from .procs.reaper import TOKEN_VAR, new_token

__all__ = ["LOG_NAME", "PREFIX", "STATE_NAME", "TIMEOUT_CODE", "PrepareEnd", "end_result", "run_prepare",
           "step_line"]

LOG_NAME = "prepare.log"
STATE_NAME = PREPARE_FILE
PREFIX = "prepare"
TIMEOUT_CODE = 124
_TAIL = 20  # lines of the failing step's output kept in the report
_POLL = 0.05
_KILL_GRACE_MAX = 10.0  # a timed-out step's group gets at most this long between SIGTERM and SIGKILL


class PrepareEnd(NamedTuple):
    """How this host's prepare steps ended."""

    failure: Optional[Failure] = None  # the step that failed (None: every step succeeded, or see below)
    stopped: Optional[int] = None  # the stop signal the shim received meanwhile
    cancelled: bool = False  # the job ended elsewhere meanwhile (the coordinator's finish)
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.failure is None and self.stopped is None and not self.cancelled


def end_result(end: PrepareEnd, elapsed: float) -> RunResult:
    """The run result of prepare steps that did not succeed: the failing step's own code, or 128+S after a stop
    signal S."""
    if end.failure is not None:
        return RunResult(end.failure.exit_code, end.failure, None, elapsed)
    sig = end.stopped if end.stopped is not None else signal.SIGTERM
    return RunResult(128 + sig, None, sig, elapsed)


def step_line(number: int, count: int, node_rank: int, host: str) -> str:
    """How a line names step ``number`` of ``count`` on this host: ``prepare step 2 of 3 on host 1 (w1)``."""
    return f"prepare step {number} of {count} on host {node_rank} ({host})"


def run_prepare(plan: LaunchPlan, base_env: Mapping[str, str], say: Callable[[str], None],
                stopped: Callable[[], Optional[int]], cancelled: Callable[[], bool] = lambda: False,
                console: Optional[Tuple[BinaryIO, BinaryIO]] = None) -> PrepareEnd:  # fmt: skip
    """Run ``plan.prepare``'s steps (see the module's docstring); ``stopped``: the stop signal received so far;
    ``cancelled``: whether the job ended elsewhere; ``console``: the (stdout, stderr) binary streams (default:
    this process's)."""
    steps = plan.prepare
    if steps is None or not steps.steps:
        return PrepareEnd()
    started = time.monotonic()
    log = os.path.join(plan.log_dir, LOG_NAME)
    try:
        sink = Sink(log, say)
    except OSError as error:
        name = step_line(1, len(steps.steps), plan.node_rank, plan.host)
        line = (f"ma-entrypoint: {name} cannot start: its log {log} cannot be written: {error.strerror or error}; "
                "point MALAUNCH_LOG_DIR at a writable folder")  # fmt: skip
        say(line[len("ma-entrypoint: "):])
        return PrepareEnd(_failure(plan, 1, steps, 3, None, log, (line,)), duration=time.monotonic() - started)
    out, err = console if console is not None else (sys.stdout.buffer, sys.stderr.buffer)
    run = _Steps(plan, steps, base_env, say, sink, consoles(out, err), started)
    try:
        end = run.all(stopped, cancelled)
    finally:
        sink.close()
        for stream in run.consoles:
            stream.close(1.0)
    return end._replace(duration=time.monotonic() - started)


class _Steps:
    """One host's run of its prepare steps."""

    def __init__(self, plan: LaunchPlan, steps: PrepareSteps, base_env: Mapping[str, str],
                 say: Callable[[str], None], sink: Sink, streams: Tuple[Console, Console],
                 started: float) -> None:  # fmt: skip
        self.plan, self.steps, self.say, self.sink = plan, steps, say, sink
        self.consoles = streams
        self.env = {**base_env, TOKEN_VAR: new_token()}
        self.deadline = started + steps.timeout

    def all(self, stopped: Callable[[], Optional[int]], cancelled: Callable[[], bool]) -> PrepareEnd:
        count = len(self.steps.steps)
        for number, argv in enumerate(self.steps.steps, 1):
            name = step_line(number, count, self.plan.node_rank, self.plan.host)
            self.say(f"{name}: {step_text(argv)}")
            self._note("running", number, argv)
            end = self.one(number, argv, stopped, cancelled)
            if not end.ok:
                self._note("failed" if end.failure is not None else "stopped", number, argv)
                return end
        self._note("done", count, self.steps.steps[-1])
        self.say(f"prepared on host {self.plan.node_rank} ({self.plan.host}): {count} step(s) succeeded")
        return PrepareEnd()

    def one(self, number: int, argv: Tuple[str, ...], stopped: Callable[[], Optional[int]],
            cancelled: Callable[[], bool]) -> PrepareEnd:  # fmt: skip
        try:
            proc = subprocess.Popen(list(argv), env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True, bufsize=0)  # fmt: skip
        except OSError as error:
            line = (f"ma-entrypoint: {self._name(number)} cannot be started: {argv[0]!r}: "
                    f"{error.strerror or error}; check that the program exists, is executable and is on PATH: "
                    f"{step_text(argv)}")  # fmt: skip
            return PrepareEnd(self._failure(number, 127, None, (line,)))
        stop = threading.Event()
        prefix = f"[{PREFIX}] ".encode()
        pumps = [threading.Thread(target=pump, args=(pipe.fileno(), LineStream(stream, prefix, self.sink), stop,
                                                     self.say), name="prepare-pump", daemon=True)
                 for pipe, stream in zip((proc.stdout, proc.stderr), self.consoles) if pipe is not None]  # fmt: skip
        for thread in pumps:
            thread.start()
        why = self._wait(proc, stopped, cancelled)
        stop.set()
        for thread in pumps:
            thread.join(10.0)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        if why == "stopped":
            return PrepareEnd(stopped=stopped())
        if why == "cancelled":
            return PrepareEnd(cancelled=True)
        if why == "timeout":
            line = (f"ma-entrypoint: {self._name(number)} timed out: the prepare steps took more than "
                    f"{self.steps.timeout:g} s (MALAUNCH_PREPARE_TIMEOUT, launcher.prepare_timeout), so its process "
                    f"group was killed: {step_text(argv)}")  # fmt: skip
            return PrepareEnd(self._failure(number, TIMEOUT_CODE, None, (*self.sink.tail(_TAIL), line)))
        code = proc.returncode
        if code == 0:
            return PrepareEnd()
        sig = -code if code < 0 else None
        said = f"was killed by {_signal_name(sig)}" if sig is not None else f"exited with {code}"
        line = f"ma-entrypoint: {self._name(number)} {said}: {step_text(argv)}"
        return PrepareEnd(self._failure(number, 128 + sig if sig is not None else code, sig,
                                        (*self.sink.tail(_TAIL), line)))  # fmt: skip

    def _wait(self, proc: subprocess.Popen[bytes], stopped: Callable[[], Optional[int]],
              cancelled: Callable[[], bool]) -> str:  # fmt: skip
        """Wait for the step; "" when it exited, else why its group was ended (``timeout``, ``stopped``,
        ``cancelled``)."""
        while True:
            try:
                proc.wait(_POLL)
                return ""
            except subprocess.TimeoutExpired:
                pass
            why = ("stopped" if stopped() is not None else "cancelled" if cancelled() else
                   "timeout" if time.monotonic() >= self.deadline else "")  # fmt: skip
            if why:
                self._end_group(proc)
                return why

    def _end_group(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGTERM to the step's process group, SIGKILL after the grace period. The group is the job's: its
        leader is this shim's child and is not reaped before the SIGKILL (only this thread waits for it, and it
        waits for its exit without reaping it), alive or a zombie it holds the group's number, which names no
        other group then (:mod:`.procs.pgroups`)."""
        grace = min(self.plan.grace_period, _KILL_GRACE_MAX)
        _signal_group(proc.pid, signal.SIGTERM)
        wait_exited(proc.pid, grace)
        _signal_group(proc.pid, signal.SIGKILL)  # what the leader left behind in its group, too
        proc.wait()

    def _name(self, number: int) -> str:
        return step_line(number, len(self.steps.steps), self.plan.node_rank, self.plan.host)

    def _failure(self, number: int, code: int, sig: Optional[int], tail: Tuple[str, ...]) -> Failure:
        return _failure(self.plan, number, self.steps, code, sig, self.sink.path, tail)

    def _note(self, state: str, number: int, argv: Tuple[str, ...]) -> None:
        """``prepare.json`` (:mod:`.prepare_status`): the state, the step and since when."""
        note_prepare(self.plan.log_dir, state, number, len(self.steps.steps), list(argv), time.time())


def _failure(plan: LaunchPlan, number: int, steps: PrepareSteps, code: int, sig: Optional[int], log: str,
             tail: Tuple[str, ...]) -> Failure:  # fmt: skip
    argv = steps.steps[number - 1]
    return Failure(name=f"prepare step {number} {step_text(argv)}", rank=None, local_rank=None, host=plan.host,
                   pid=None, exit_code=code, signal=sig, log_file=log, tail=tail, source="prepare",
                   why="a prepare step of this host failed before any attempt started")  # fmt: skip


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
