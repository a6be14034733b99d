"""Execute a :class:`~malaunch.entrypoint.plan.LaunchPlan`: start all, forward output, stop on failure.

Contract of :func:`run_plan`:

1. The log directory and every log file are created before anything starts; if that fails, ``LaunchError``.
2. All processes start at once, each in a session of its own, with ``{**base_env, **spec.env}`` plus
   ``MALAUNCH_SHIM_TOKEN``; a program that cannot be started tears down the others and raises ``LaunchError``.
3. Output follows ``plan.log_source`` (see :mod:`malaunch.entrypoint.plan` and :mod:`._pump`).
4. The first failure is the root cause: the first process that exits non-zero, torchrun's own "Root Cause"
   entry, or msrun's "Worker process <pid> exit with exception" line. Then every process group of the plan
   and every process carrying the token gets SIGTERM, ``plan.grace_period`` later SIGKILL.
5. SIGTERM, SIGINT and SIGHUP to the shim tear the job down the same way; the result is 128+signal.
6. A forked watchdog kills the token processes should the shim itself be SIGKILLed.
7. On return every output is drained, no token process is left, and every child has been reaped.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, BinaryIO, Dict, List, Mapping, Optional, Set, Tuple, Union

from . import _reaper
from ._pump import (
    Console,
    FileFollower,
    LineStream,
    PrefixDemux,
    Sink,
    follow,
    pump,
    tune_malloc,
)
from ._reaper import TOKEN_VAR
from .errors import LaunchError
from .plan import LaunchPlan, ProcessSpec
from .report import Failure, RunResult, parse_msrun_failures, parse_torchrun_root_cause

__all__ = ["TOKEN_VAR", "Failure", "RunResult", "run_plan"]

_HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_WATCHDOG_GRACE_CAP = 2.0
_FOLLOW_INTERVAL = 0.05
_LAUNCHER_RING = 256 << 10  # enough of torchrun's own output to hold its failure summary
_LOG_HINT = "point MALAUNCH_LOG_DIR (or --log-dir) at a writable directory"


@dataclass(frozen=True)
class _Outcome:
    kind: str  # "success", "exit" (process ``index`` failed), "worker" (msrun line), "signal"
    index: int = -1
    pid: int = 0
    code: int = 0
    signum: int = 0


def _shell_code(code: int) -> Tuple[int, Optional[int]]:
    """Shell-style exit code and signal from a return code (negative: killed by that signal)."""
    return (128 - code, -code) if code < 0 else (code, None)


def _open_log(path: str) -> int:
    parent = os.path.dirname(path)
    try:
        if parent:
            os.makedirs(parent, exist_ok=True)
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    except OSError as error:
        raise LaunchError(f"cannot open log file {path!r}: {error.strerror}; {_LOG_HINT}") from None


class _Run:
    """State of one :func:`run_plan` call."""

    def __init__(self, plan: LaunchPlan, base_env: Mapping[str, str], out: BinaryIO, err: BinaryIO) -> None:
        self.plan = plan
        self.base_env = base_env
        self.out = Console(out)
        self.err = Console(err)
        self.token = _reaper.new_token()
        self.events: queue.SimpleQueue[Tuple[Any, ...]] = queue.SimpleQueue()
        self.procs: List[subprocess.Popen[bytes]] = []
        self.returncodes: Dict[int, int] = {}
        self.stop = threading.Event()
        self.threads: List[threading.Thread] = []
        self.waiters: List[threading.Thread] = []
        self.fds: List[int] = []
        self.sinks: List[Sink] = []  # one per process
        self.rank_sinks: Dict[int, Sink] = {}
        self.rank_streams: Dict[int, LineStream] = {}
        self.follower: Optional[FileFollower] = None
        self.msrun_failures: List[Tuple[int, int]] = []
        self.pid_ranks: Dict[int, int] = {}
        self.pid_skip: Set[int] = set()
        self.dead_workers: Set[int] = set()  # msrun workers whose exit was already seen as a zombie
        self.exclude: Set[int] = set()
        self.shim_signal: Optional[int] = None
        self.finished = False

    def warn(self, text: str) -> None:
        self.err.message(f"[ma-entrypoint] warning: {text}")

    # -- before anything starts ---------------------------------------------------------------------------
    def prepare(self) -> None:
        plan = self.plan
        try:
            os.makedirs(plan.log_dir, exist_ok=True)
        except OSError as error:
            raise LaunchError(
                f"cannot create log directory {plan.log_dir!r}: {error.strerror}; {_LOG_HINT}"
            ) from None
        if not os.access(plan.log_dir, os.W_OK | os.X_OK):
            raise LaunchError(f"log directory {plan.log_dir!r} is not writable; {_LOG_HINT}")
        for path, text in sorted(plan.files.items()):
            _write_plan_file(path, text)
        for spec in plan.processes:
            if not spec.argv:
                raise LaunchError(f"process {spec.name!r} has an empty command line: the plan is broken")
            if spec.cwd:
                try:
                    os.makedirs(spec.cwd, exist_ok=True)
                except OSError as error:
                    raise LaunchError(
                        f"cannot create working directory {spec.cwd!r} for {spec.name}: {error.strerror}; "
                        "check the path and its permissions"
                    ) from None
            fd = _open_log(spec.log_file)
            self.fds.append(fd)
            ring = _LAUNCHER_RING if plan.log_source != "pipe" else 64 << 10
            self.sinks.append(Sink(spec.log_file, fd, self.warn, ring))
        for rank, path in sorted(plan.rank_logs.items()):
            if plan.log_source == "prefixed":
                fd = _open_log(path)
                self.fds.append(fd)
                self.rank_sinks[rank] = Sink(path, fd, self.warn)
            elif plan.log_source == "files":
                self.rank_sinks[rank] = Sink(path, None, self.warn)
                self.rank_streams[rank] = LineStream(self.out, b"[rank %d] " % rank, self.rank_sinks[rank])
        if plan.log_source == "files":
            self.follower = FileFollower(plan.rank_logs, self.rank_streams)

    # -- start ----------------------------------------------------------------------------------------------
    def start(self) -> Optional[LaunchError]:
        for spec in self.plan.processes:
            env = {**self.base_env, **spec.env, TOKEN_VAR: self.token}
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
            self.procs.append(proc)
            self.pid_skip.add(proc.pid)  # the launcher itself is reaped by its waiter, never watched as a worker
        return None

    def _routers(self, index: int, spec: ProcessSpec) -> Tuple[Union[LineStream, PrefixDemux], ...]:
        sink = self.sinks[index]
        source = self.plan.log_source
        if source == "pipe":
            label = f"rank {spec.rank}" if spec.rank is not None else spec.name
            prefix = f"[{label}] ".encode()
            return LineStream(self.out, prefix, sink), LineStream(self.err, prefix, sink)
        prefix = f"[{self.plan.method}] ".encode()
        if source == "prefixed":
            return (
                PrefixDemux(self.out, prefix, sink, self.rank_sinks),
                PrefixDemux(self.err, prefix, sink, self.rank_sinks),
            )
        return (
            LineStream(self.out, prefix, sink, self._msrun_lines),
            LineStream(self.err, prefix, sink, self._msrun_lines),
        )

    def start_threads(self) -> None:
        for index, proc in enumerate(self.procs):
            waiter = threading.Thread(target=self._wait, args=(index, proc), name="wait", daemon=True)
            waiter.start()
            self.waiters.append(waiter)
        for index, proc in enumerate(self.procs):
            spec = self.plan.processes[index]
            streams = (proc.stdout, proc.stderr)
            for stream, router in zip(streams, self._routers(index, spec)):
                assert stream is not None

                def warn(text: str, name: str = spec.name) -> None:
                    self.warn(f"{name}: {text}")

                thread = threading.Thread(
                    target=pump, args=(stream.fileno(), router, self.stop, warn), name="pump", daemon=True
                )
                thread.start()
                self.threads.append(thread)
        if self.follower is not None:
            thread = threading.Thread(
                target=follow,
                args=(self.follower, self.stop, _FOLLOW_INTERVAL, self._scan_ranks),
                name="follow",
                daemon=True,
            )
            thread.start()
            self.threads.append(thread)
        elif self.plan.watch_workers:
            thread = threading.Thread(target=self._watch, name="watch", daemon=True)
            thread.start()
            self.threads.append(thread)

    def _watch(self) -> None:
        while not self.stop.wait(_FOLLOW_INTERVAL):
            self._scan_ranks()

    def _wait(self, index: int, proc: subprocess.Popen[bytes]) -> None:
        self.events.put(("exit", index, proc.wait()))

    def _msrun_lines(self, lines: bytes) -> None:
        for pid, code in parse_msrun_failures(lines):
            self.msrun_failures.append((pid, code))
            self.events.put(("worker", pid, code))

    def _scan_ranks(self) -> None:
        _reaper.scan_ranks(self.token, self.pid_ranks, self.pid_skip)
        # msrun notices a dead worker only at its once-a-second poll, torchrun at its 0.1 s monitor interval and
        # then spends its own shutdown; the worker's zombie tells us at once.
        if not self.plan.watch_workers:
            return
        for pid in list(self.pid_ranks):
            if pid in self.dead_workers:
                continue
            code = _reaper.zombie_returncode(pid)
            if code is not None:
                self.dead_workers.add(pid)
                if code != 0:
                    self.events.put(("worker", pid, code))

    def _on_signal(self, signum: int, frame: object) -> None:
        self.events.put(("signal", signum))  # SimpleQueue.put is reentrant: safe in a signal handler

    # -- monitor and teardown -------------------------------------------------------------------------------
    def _absorb(self, event: Tuple[Any, ...]) -> Optional[_Outcome]:
        kind = event[0]
        if kind == "exit":
            self.returncodes[event[1]] = event[2]
            if event[2] != 0:
                return _Outcome("exit", index=event[1])
            if len(self.returncodes) == len(self.procs):
                return _Outcome("success")
        elif kind == "signal":
            if self.shim_signal is None:
                self.shim_signal = event[1]
            return _Outcome("signal", signum=event[1])
        elif kind == "worker":
            return _Outcome("worker", pid=event[1], code=event[2])
        return None

    def monitor(self) -> _Outcome:
        while True:
            try:
                event = self.events.get(timeout=1.0)
            except queue.Empty:
                _reaper.reap_zombie_children(self.exclude | {p.pid for p in self.procs})
                continue
            outcome = self._absorb(event)
            if outcome is not None:
                if outcome.kind == "worker":
                    self._scan_ranks()  # the worker's children may still be there to tell its rank
                return outcome

    def _pump_events(self, timeout: float) -> bool:
        """Take pending events (waiting up to ``timeout`` for the first); True if the shim got a signal."""
        signalled = False
        try:
            event = self.events.get(timeout=timeout)
            while True:
                if self._absorb(event) is not None and event[0] == "signal":
                    signalled = True
                event = self.events.get_nowait()
        except queue.Empty:
            return signalled

    def _all_exited(self) -> bool:
        return len(self.returncodes) == len(self.procs)

    def teardown(self, sig: int) -> None:
        _reaper.stop_tree(
            groups=[proc.pid for proc in self.procs],  # pgid == pid; members may outlive the leader
            token=self.token,
            exclude=self.exclude,
            sig=sig,
            grace=self.plan.grace_period,
            all_exited=self._all_exited,
            wait=self._pump_events,
            warn=self.warn,
        )

    def finish(self, sig: int) -> None:
        """Teardown, drain every output, final sweep."""
        self.finished = True
        self.teardown(sig)
        self.stop.set()
        for thread in self.threads:
            thread.join(30.0)
        for waiter in self.waiters:
            waiter.join(1.0)
        _reaper.sweep(self.token, self.exclude)
        if not any(thread.is_alive() for thread in self.threads):
            for proc in self.procs:
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()

    # -- result -------------------------------------------------------------------------------------------
    def root_cause(self, outcome: _Outcome) -> Optional[Failure]:
        """The first failure: a process's own exit, or what its launcher said about a rank."""
        if outcome.kind not in ("exit", "worker"):
            return None
        index = max(outcome.index, 0)
        spec, sink = self.plan.processes[index], self.sinks[index]
        rank, local, code = spec.rank, spec.local_rank, self.returncodes.get(index, 1)
        pid: Optional[int] = self.procs[index].pid
        found = [(outcome.pid, outcome.code)] if outcome.kind == "worker" else self.msrun_failures[:1]
        parsed = parse_torchrun_root_cause(sink.text()) if self.plan.log_source == "prefixed" else None
        if found:  # msrun named the worker's pid; its environment told us the rank
            pid, code = found[0]
            rank = self.pid_ranks.get(pid)
            ranks = sorted(self.plan.rank_logs)
            local = ranks.index(rank) if rank in ranks else None
        elif parsed is not None and parsed.exitcode != 0:  # else torchrun's own code 1 is all there is
            rank, local, pid, code = parsed.rank, parsed.local_rank, parsed.pid, parsed.exitcode
        rank_sink = self.rank_sinks.get(rank) if rank is not None else None
        exit_code, sig = _shell_code(code)
        return Failure(
            name=f"rank-{rank}" if rank_sink is not None else spec.name,
            rank=rank,
            local_rank=local,
            host=self.plan.host,
            pid=pid,
            exit_code=exit_code,
            signal=sig,
            log_file=(rank_sink or sink).path,
            tail=(rank_sink or sink).tail(),
        )

    def result(self, outcome: _Outcome, started: float) -> RunResult:
        failure = self.root_cause(outcome)
        if outcome.kind == "signal":
            code = 128 + outcome.signum
        elif failure is not None:
            code = failure.exit_code or 1
        else:
            code = 0
        return RunResult(code, failure, self.shim_signal, time.monotonic() - started)

    def close_files(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []

    # -- the whole run --------------------------------------------------------------------------------------
    def execute(self, handle_signals: bool, started: float) -> RunResult:
        keep = _reaper.child_pids()
        watchdog = _reaper.start_watchdog(self.token, min(self.plan.grace_period, _WATCHDOG_GRACE_CAP))
        self.exclude = keep | {watchdog.pid}
        subreaper = _reaper.set_subreaper()
        previous: Dict[int, Any] = {}
        if handle_signals and threading.current_thread() is threading.main_thread():  # else: cannot
            previous = {sig: signal.signal(sig, self._on_signal) for sig in _HANDLED}
        try:
            error = self.start()
            watchdog.announce_groups(proc.pid for proc in self.procs)
            self.start_threads()
            if error is not None:
                self.finish(signal.SIGTERM)
                raise error
            outcome = self.monitor()
            forward = outcome.signum if outcome.signum in (signal.SIGTERM, signal.SIGINT) else signal.SIGTERM
            if outcome.kind == "worker" and self.plan.log_source == "files":
                # An msrun worker failed and we saw it first. The workers get SIGTERM and the grace period directly
                # (they carry the token) and write their logs themselves, so msrun (which ignores SIGTERM and would
                # wait for its scheduler) has nothing left to do: it is killed now. torchrun is not: its tee
                # threads still carry the ranks' last lines to us, so it gets SIGTERM like any group.
                _reaper.signal_groups([proc.pid for proc in self.procs], signal.SIGKILL)
            self.finish(forward)
            return self.result(outcome, started)
        except BaseException:
            if not self.finished:
                self.finish(signal.SIGTERM)
            raise
        finally:
            self.close_files()
            _reaper.reap_zombie_children(self.exclude | {proc.pid for proc in self.procs})
            watchdog.finish()
            for sig, handler in previous.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            _reaper.restore_subreaper(subreaper)


def _write_plan_file(path: str, text: str) -> None:
    """Write a file the plan carries (e.g. a converted rank table) atomically, before anything starts."""
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        partial = f"{path}.{os.getpid()}.tmp"
        with open(partial, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(partial, path)
    except OSError as error:
        raise LaunchError(f"cannot write {path!r}: {error.strerror}; {_LOG_HINT}") from None


def run_plan(
    plan: LaunchPlan,
    base_env: Mapping[str, str],
    *,
    console_out: Optional[BinaryIO] = None,
    console_err: Optional[BinaryIO] = None,
    handle_signals: bool = True,
) -> RunResult:
    """Run every process of ``plan`` to the end and say how it ended.

    Args:
        plan: what to start (executed exactly as ``--dry-run`` prints it).
        base_env: the environment every process inherits (``spec.env`` is laid over it).
        console_out: where prefixed stdout lines go (default: this process's stdout).
        console_err: where prefixed stderr lines go (default: this process's stderr).
        handle_signals: catch SIGTERM/SIGINT/SIGHUP while running (main thread only).

    Raises:
        LaunchError: the log directory or a log file cannot be written, or a program cannot be started
            (the processes already started are torn down first).
    """
    started = time.monotonic()
    out = console_out if console_out is not None else sys.stdout.buffer
    err = console_err if console_err is not None else sys.stderr.buffer
    tune_malloc()
    run = _Run(plan, base_env, out, err)
    try:
        run.prepare()
        return run.execute(handle_signals, started)
    finally:
        run.close_files()
