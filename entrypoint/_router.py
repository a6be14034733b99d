"""The output router of one run: log sinks, the console streams, and the threads that move bytes between them.

How bytes flow (``plan.log_source``):

- ``pipe``: a pump thread per stdout/stderr pipe splices the bytes into the process's log file as they come
  (:mod:`._splice`); a reader thread per process reads them back from the file and sends whole lines to the
  console with a ``[rank N] `` prefix.
- ``attempt_files`` (torchrun ``--redirects=3``): every worker writes its stdout and stderr into files of
  its own under torchrun's ``--log_dir`` (one folder per attempt); a follower thread
  (:class:`._torchrun_logs.TorchrunLogs`) copies them into ``rank-N.log`` and prints each line with its
  ``[rank N] `` prefix. torchrun's own output goes to ``torchrun.log``.
- ``files`` (msrun): msrun writes ``worker_N.log`` itself; a follower thread reads those files and prints
  each line with its rank prefix. msrun's own output goes to ``msrun.log``.

The console never holds anything up: writes to it are queued (:class:`._console.Console`). A rank's console
copy is read back from its log file at the console's pace (lag, not loss); only a stuck console costs console
lines (each gap said in one line), never a log-file byte, and never time. Once the job starts to end
(:meth:`Output.quiet`), a launcher's own lines (torchrun's and msrun's teardown chatter) go to its log file only.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from typing import BinaryIO, Callable, Dict, List, Optional, Tuple

from ._console import CONSOLE_DRAIN, Console
from ._pump import FileFollower, LineStream, Sink, follow, pump
from ._splice import SpliceSink, splice_pump
from .errors import LaunchError
from .plan import LaunchPlan, ProcessSpec

__all__ = ["Output"]

_FOLLOW_INTERVAL = 0.05
_LAUNCHER_RING = 256 << 10  # enough of torchrun's own output to hold its failure summary
_CONSOLE_PATIENCE = 1.0  # at the end, a console that takes nothing for this long is given up on
_JOIN_MARGIN = 30.0  # a pump still running this long after the drain deadline is left behind
LOG_HINT = "point MALAUNCH_LOG_DIR (or --log-dir) at a writable directory"


def _sink(path: str, warn: Callable[[str], None], ring: int = 64 << 10, spliced: bool = False) -> Sink:
    try:
        return SpliceSink(path, warn, ring) if spliced else Sink(path, warn, ring)
    except OSError as error:
        raise LaunchError(f"cannot open log file {path!r}: {error.strerror}; {LOG_HINT}") from None


class Output:
    """Sinks and console streams of one plan, and the pump/follow threads that feed them."""

    def __init__(self, plan: LaunchPlan, out: BinaryIO, err: BinaryIO) -> None:
        self.plan = plan
        self.out = Console(out, "stdout")
        self.err = Console(err, "stderr")
        self.sinks: List[Sink] = []  # one per process
        self.rank_sinks: Dict[int, Sink] = {}
        self._rank_streams: Dict[int, LineStream] = {}
        self._quiet = threading.Event()
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []
        self._follower: Optional[FileFollower] = None
        self.on_launcher_lines: Callable[[int, bytes], None] = lambda index, lines: None

    def warn(self, text: str) -> None:
        """One warning line from the shim on its stderr console."""
        self.err.message(f"[ma-entrypoint] warning: {text}")

    def open(self) -> None:
        """Create every log file the shim writes (before anything starts). Raises LaunchError."""
        plan = self.plan
        ring = _LAUNCHER_RING if plan.log_source != "pipe" else 64 << 10
        for spec in plan.processes:
            self.sinks.append(_sink(spec.log_file, self.warn, ring, plan.log_source == "pipe"))
        for rank, path in sorted(plan.rank_logs.items()):
            if plan.log_source == "attempt_files":
                self.rank_sinks[rank] = _sink(path, self.warn)
            elif plan.log_source == "files":
                self.rank_sinks[rank] = Sink(path, self.warn, write_file=False)
                self._rank_streams[rank] = LineStream(self.out, b"[rank %d] " % rank, self.rank_sinks[rank])
        if plan.log_source == "files":
            self._follower = FileFollower(plan.rank_logs, self._rank_streams)
        elif plan.log_source == "attempt_files":
            from ._errorfiles import torchrun_log_dir  # here: only torchrun needs them (start-up time)
            from ._torchrun_logs import TorchrunLogs

            log_dir = torchrun_log_dir(plan.processes[0].argv) or os.path.join(plan.log_dir, "torchrun")
            ranks = sorted(plan.rank_logs)
            self._follower = TorchrunLogs(log_dir, ranks, self.rank_sinks, self.sinks[0], self.out, self.err)

    def quiet(self) -> None:
        """From now on a launcher's own lines go to its log file only."""
        self._quiet.set()

    def _routers(self, index: int, spec: ProcessSpec) -> Tuple[LineStream, LineStream]:
        sink = self.sinks[index]
        source = self.plan.log_source
        if source == "pipe":  # the file is written by splice_pump: the streams make the console copy only
            label = f"rank {spec.rank}" if spec.rank is not None else spec.name
            prefix = f"[{label}] ".encode()
            return (
                LineStream(self.out, prefix, None, gap_note=_gap_note(label, "stdout", sink.path)),
                LineStream(self.err, prefix, None, gap_note=_gap_note(label, "stderr", sink.path)),
            )
        prefix = f"[{self.plan.method}] ".encode()

        def lines(data: bytes) -> None:
            self.on_launcher_lines(index, data)

        return (
            LineStream(self.out, prefix, sink, lines, self._quiet),
            LineStream(self.err, prefix, sink, lines, self._quiet),
        )

    def attach(self, procs: List[subprocess.Popen[bytes]], tick: Callable[[], None]) -> None:
        """Start a pump thread per pipe of ``procs`` and, under msrun and torchrun, the follower of the workers'
        files."""
        for index, proc in enumerate(procs):
            spec = self.plan.processes[index]
            pipes = (proc.stdout, proc.stderr)
            routers = self._routers(index, spec)

            def warn(text: str, name: str = spec.name) -> None:
                self.warn(f"{name}: {text}")

            sink = self.sinks[index]
            if isinstance(sink, SpliceSink):
                for number, pipe in enumerate(pipes):
                    assert pipe is not None
                    self._spawn(splice_pump, (pipe.fileno(), sink, number, self._stop), "splice")
                self._spawn(sink.forward, (list(routers), (self.out, self.err), warn), "console-copy")
                continue
            for pipe, router in zip(pipes, routers):
                assert pipe is not None
                self._spawn(pump, (pipe.fileno(), router, self._stop, warn), "pump")
        if self._follower is not None:
            self._spawn(follow, (self._follower, self._stop, _FOLLOW_INTERVAL, tick), "follow")

    def _spawn(self, target: Callable[..., None], args: Tuple[object, ...], name: str) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def drain(self, procs: List[subprocess.Popen[bytes]]) -> None:
        """Every process has ended: take the rest of every pipe and file, then release the pipes. The console
        copy gets :data:`CONSOLE_DRAIN` s to catch up (a console that accepts nothing for 1 s is given up)."""
        self._stop.set()
        deadline = time.monotonic() + CONSOLE_DRAIN
        for console in (self.out, self.err):
            console.ending(_CONSOLE_PATIENCE, deadline)
        for thread in self._threads:
            thread.join(max(0.0, deadline + _JOIN_MARGIN - time.monotonic()))
        if not any(thread.is_alive() for thread in self._threads):
            for proc in procs:
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()

    def close(self) -> None:
        """Release the log files, and deliver what the consoles still hold (giving up on a stuck one)."""
        for sink in [*self.sinks, *self.rank_sinks.values()]:
            sink.close()

        def cut(name: str) -> Callable[[int], str]:
            return lambda lost: (
                f"[ma-entrypoint] warning: the console ({name}) was still {lost} bytes behind "
                f"{CONSOLE_DRAIN:.0f} s after the end; they were not shown, the log files under "
                f"{self.plan.log_dir} have every line"
            )

        left = self.out.close(_CONSOLE_PATIENCE, cut("stdout"))
        if self.out.dropped or left:
            what = [f"{self.out.dropped} writes to it were dropped"] if self.out.dropped else []
            if left:
                what.append(f"it accepted nothing for {_CONSOLE_PATIENCE:.0f} s at the end ({left} bytes not shown)")
            self.warn(
                f"the console (stdout) did not keep up: {' and '.join(what)}; "
                f"the log files under {self.plan.log_dir} have every line"
            )
        self.err.close(_CONSOLE_PATIENCE, cut("stderr"))

    def log_of(self, index: int, rank: Optional[int]) -> Sink:
        """The sink with the best log of a rank (its own), else of process ``index``."""
        sink = self.rank_sinks.get(rank) if rank is not None else None
        return sink if sink is not None else self.sinks[index]


def _gap_note(label: str, stream: str, path: str) -> Callable[[int, str], str]:
    """The line a rank's console copy shows where it skipped bytes."""

    def note(count: int, reason: str) -> str:
        return (
            f"[ma-entrypoint] warning: {count} bytes of {label}'s {stream} were not shown here ({reason}); "
            f"the full log is {path}"
        )

    return note


def write_plan_file(path: str, text: str) -> None:
    """Write a file the plan carries (e.g. a converted rank table) atomically, before anything starts."""
    from .atomicfile import write_atomic  # only for plans that carry files (a converted rank table)

    try:
        write_atomic(path, text)
    except OSError as error:
        raise LaunchError(f"cannot write {path!r}: {error.strerror}; {LOG_HINT}") from None
