"""The output router of one run: log sinks, the console streams, and the threads that move bytes between them.

How bytes flow (``plan.log_source``):

- ``pipe``: a pump thread per process splices the bytes of its stdout and stderr pipes into its log file as
  they come (:mod:`.splice`); a reader thread per process reads them back from the file and sends whole lines to
  the console with a ``[rank N] `` prefix.
- ``attempt_files`` (torchrun ``--redirects=3``): every worker writes its stdout and stderr into files of
  its own, one folder per attempt; the launcher's follower thread (``Launcher.attempt_follower``) copies them
  into ``rank-N.log`` at full speed, and a reader thread per rank reads ``rank-N.log`` back and sends whole lines
  to the console with the ``[rank N] `` prefix (:mod:`.readback`). The launcher's own output goes to its
  ``log_file``.
- ``files`` (msrun): msrun writes ``worker_N.log`` itself; a follower thread notes how each file grows, and
  a reader thread per rank reads it back to the console with the rank prefix. msrun's own output goes to
  ``msrun.log``.

The console never holds anything up: writes to it are queued (:class:`.console.Console`). A rank's console
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

from ...contract.errors import LaunchError
from ...plan.launch_plan import LaunchPlan, ProcessSpec
from ...report.atomicfile import write_atomic
from ...report.report import LostOutput
from ...report.reportfile import reserve_room
from ..launcher import Launcher
from .console import CONSOLE_DRAIN, consoles
from .pump import FileFollower, LineStream, Sink, follow, pump
from .readback import MirrorFeed
from .splice import SpliceSink, splice_pump

__all__ = ["LOG_HINT", "Output", "prepare_folders", "write_plan_file"]

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

    def __init__(self, plan: LaunchPlan, out: BinaryIO, err: BinaryIO, launcher: Optional[Launcher] = None) -> None:
        self.plan = plan
        self.launcher = launcher if launcher is not None else Launcher()
        self.specs: List[ProcessSpec] = list(plan.processes)
        self.out, self.err = consoles(out, err)  # one queue when stdout and stderr are one file
        self.sinks: List[Sink] = []  # one per process
        self.rank_sinks: Dict[int, Sink] = {}
        self._rank_feeds: Dict[int, MirrorFeed] = {}
        self._rank_copies: Dict[int, List[LineStream]] = {}  # a rank log's console copy (its prefix), by place
        self._labels: Dict[int, int] = {}  # place rank -> the rank its worker sees, where they differ (elastic)
        self._quiet = threading.Event()
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []
        self._own: Dict[int, List[threading.Thread]] = {}  # process index -> the threads reading its pipes
        self._follower: Optional[FileFollower] = None
        self.on_launcher_lines: Callable[[int, bytes], None] = lambda index, lines: None

    def warn(self, text: str) -> None:
        """One warning line from the shim on its stderr console."""
        self.err.message(f"[ma-entrypoint] warning: {text}")

    def say(self, text: str) -> None:
        """A message from the shim on its stderr console (as ``main`` says its own)."""
        self.err.message(f"[ma-entrypoint] {text}", keep=True)

    def open(self) -> None:
        """Create every log file the shim writes (before anything starts). Raises LaunchError."""
        plan = self.plan
        ring = _LAUNCHER_RING if plan.log_source != "pipe" else 64 << 10
        for spec in self.specs:
            self.sinks.append(_sink(spec.log_file, self.warn, ring, plan.log_source == "pipe"))
        for rank, path in sorted(plan.rank_logs.items()):
            if plan.log_source == "attempt_files":  # written by the follower, the console copy read back
                self.rank_sinks[rank] = _sink(path, self.warn, spliced=True)
            elif plan.log_source == "files":  # msrun writes it; the console copy is read back from it
                followed = SpliceSink(path, self.warn, write_file=False)
                self.rank_sinks[rank] = followed
                self._rank_feeds[rank] = MirrorFeed(followed)
        if plan.log_source == "files":
            self._follower = FileFollower(plan.rank_logs, self._rank_feeds)
        elif plan.log_source == "attempt_files":
            copies = {rank: sink for rank, sink in self.rank_sinks.items() if isinstance(sink, SpliceSink)}
            self._follower = self.launcher.attempt_follower(plan, copies, self.sinks[0], self.out, self.err,
                                                            self.relabel)  # fmt: skip

    def add(self, spec: ProcessSpec) -> int:
        """Open the log of a process started later (a relaunch, ``log_source`` ``pipe``); its index.
        Raises LaunchError."""
        self.sinks.append(_sink(spec.log_file, self.warn, 64 << 10, True))
        self.specs.append(spec)
        return len(self.specs) - 1

    def quiet(self) -> None:
        """From now on a launcher's own lines go to its log file only."""
        self._quiet.set()

    def _copies(self, label: str, path: str) -> List[LineStream]:
        """The console copy of a log file read back by :meth:`SpliceSink.forward` (it writes no file itself)."""
        prefix = f"[{label}] ".encode()
        return [
            LineStream(self.out, prefix, None, gap_note=_gap_note(label, "stdout", path)),
            LineStream(self.err, prefix, None, gap_note=_gap_note(label, "stderr", path)),
        ]

    def relabel(self, place: int, rank: int) -> None:
        """The worker at this host's place rank ``place`` sees itself as rank ``rank`` (an elastic rendezvous
        numbers the hosts its own way): its log becomes ``rank-<rank>.log`` and its console prefix
        ``[rank <rank>] ``. Called by the follower before it copies the worker's first byte; a place already
        named, or a rank another place holds, stays as it is."""
        sink = self.rank_sinks.get(place)
        if rank == place or sink is None or rank in self.rank_sinks or place in self._labels:
            return
        sink.path = path = _renamed_log(sink.path, rank, self.warn)
        # a new dict, not a change of the one other threads may be reading (lost_output, log_of)
        self.rank_sinks = {**{key: value for key, value in self.rank_sinks.items() if key != place}, rank: sink}
        self._labels[place] = rank
        for copy, stream in zip(self._rank_copies.get(place, ()), ("stdout", "stderr")):
            copy.relabel(f"[rank {rank}] ".encode(), _gap_note(f"rank {rank}", stream, path))

    def _routers(self, index: int, spec: ProcessSpec) -> Tuple[LineStream, LineStream]:
        sink = self.sinks[index]
        source = self.plan.log_source
        if source == "pipe":  # the file is written by splice_pump: the streams make the console copy only
            label = f"rank {spec.rank}" if spec.rank is not None else spec.name
            out, err = self._copies(label, sink.path)
            return out, err
        prefix = f"[{self.plan.method}] ".encode()

        def lines(data: bytes) -> None:
            self.on_launcher_lines(index, data)

        return (
            LineStream(self.out, prefix, sink, lines, self._quiet),
            LineStream(self.err, prefix, sink, lines, self._quiet),
        )

    def attach(self, procs: List[subprocess.Popen[bytes]], tick: Callable[[], None]) -> None:
        """Start the threads that read the pipes of ``procs`` (:meth:`attach_one`) and, under msrun and torchrun,
        the follower of the workers' files."""
        for index, proc in enumerate(procs):
            self.attach_one(index, proc)
        for rank, rank_sink in sorted(self.rank_sinks.items()):
            if isinstance(rank_sink, SpliceSink):  # torchrun, msrun: the follower feeds it, this reads back

                def warn_rank(text: str, rank: int = rank) -> None:
                    self.warn(f"rank {self._labels.get(rank, rank)}: {text}")

                copies = self._rank_copies[rank] = self._copies(f"rank {rank}", rank_sink.path)
                self._spawn(rank_sink.forward, (copies, (self.out, self.err), warn_rank), "console-copy")
        if self._follower is not None:
            self._spawn(follow, (self._follower, self._stop, _FOLLOW_INTERVAL, tick), "follow")

    def attach_one(self, index: int, proc: subprocess.Popen[bytes]) -> None:
        """Start the threads that read process ``index``'s pipes."""
        spec = self.specs[index]
        pipes = (proc.stdout, proc.stderr)
        routers = self._routers(index, spec)

        def warn(text: str, name: str = spec.name) -> None:
            self.warn(f"{name}: {text}")

        sink = self.sinks[index]
        if isinstance(sink, SpliceSink):
            fds = [pipe.fileno() for pipe in pipes if pipe is not None]
            self._spawn(splice_pump, (fds, sink, self._stop), "splice", index)
            self._spawn(sink.forward, (list(routers), (self.out, self.err), warn), "console-copy")
            return
        for pipe, router in zip(pipes, routers):
            assert pipe is not None
            self._spawn(pump, (pipe.fileno(), router, self._stop, warn), "pump", index)

    def settle(self, index: int, seconds: float) -> None:
        """Wait up to ``seconds`` for process ``index``'s pipes to be read to their end (it has exited)."""
        deadline = time.monotonic() + seconds
        for thread in self._own.get(index, []):
            thread.join(max(0.0, deadline - time.monotonic()))

    def _spawn(self, target: Callable[..., None], args: Tuple[object, ...], name: str, owner: int = -1) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)
        self._own.setdefault(owner, []).append(thread)

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

        name = "stdout and stderr" if self.out.shared else "stdout"
        left = self.out.close(_CONSOLE_PATIENCE, cut(name))
        if self.out.dropped or left:
            what = [f"{self.out.dropped} writes to it were dropped"] if self.out.dropped else []
            if left:
                what.append(f"it accepted nothing for {_CONSOLE_PATIENCE:.0f} s at the end ({left} bytes not shown)")
            self.warn(
                f"the console ({name}) did not keep up: {' and '.join(what)}; "
                f"the log files under {self.plan.log_dir} have every line"
            )
        self.err.close(_CONSOLE_PATIENCE, cut("stderr"))

    def lost_output(self) -> Tuple[LostOutput, ...]:
        """The log files that failed part-way, with the byte from which each holds nothing."""
        return tuple(
            LostOutput(sink.path, sink.lost_at, sink.lost_reason)
            for sink in [*self.sinks, *self.rank_sinks.values()]
            if sink.lost_at is not None
        )

    def log_of(self, index: int, rank: Optional[int]) -> Sink:
        """The sink with the best log of a rank (its own), else of process ``index``."""
        sink = self.rank_sinks.get(rank) if rank is not None else None
        return sink if sink is not None else self.sinks[index]


def _renamed_log(old: str, rank: int, warn: Callable[[str], None]) -> str:
    """Rename the log ``old`` to ``rank-<rank>.log`` beside it; the log's path after (``old`` when the rename
    failed, which ``warn`` says)."""
    path = os.path.join(os.path.dirname(old), f"rank-{rank}.log")
    try:
        os.rename(old, path)
    except OSError as error:
        warn(f"cannot rename {old} to {path}: {error.strerror}; rank {rank}'s log keeps that name")
        return old
    return path


def _gap_note(label: str, stream: str, path: str) -> Callable[[int, str], str]:
    """The line a rank's console copy shows where it skipped bytes."""

    def note(count: int, reason: str) -> str:
        return (
            f"[ma-entrypoint] warning: {count} bytes of {label}'s {stream} were not shown here ({reason}); "
            f"the full log is {path}"
        )

    return note


def write_plan_file(path: str, text: str) -> None:
    """Write a file the plan carries (e.g. a converted rank table) atomically, before anything starts; one that
    starts with ``#!`` is a program (msrun's ``python`` in the birth folder): it is made executable."""

    try:
        write_atomic(path, text, mode=0o755 if text.startswith("#!") else None)
    except OSError as error:
        raise LaunchError(f"cannot write {path!r}: {error.strerror}; {LOG_HINT}") from None


def prepare_folders(plan: LaunchPlan) -> None:
    """Create the log folder, the plan's files and the working folders, before anything starts. Raises LaunchError."""
    try:
        os.makedirs(plan.log_dir, exist_ok=True)
    except OSError as error:
        raise LaunchError(f"cannot create log directory {plan.log_dir!r}: {error.strerror}; {LOG_HINT}") from None
    if not os.access(plan.log_dir, os.W_OK | os.X_OK):
        raise LaunchError(f"log directory {plan.log_dir!r} is not writable; {LOG_HINT}")
    reserve_room(plan.report_file)  # before the logs take the disk: the report must fit at the end
    for path, text in sorted(plan.files.items()):
        write_plan_file(path, text)
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
