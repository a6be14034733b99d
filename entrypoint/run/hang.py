"""Hang detection on one host: its ranks went silent (no output byte, no touch of the progress file) for too long.

``MALAUNCH_HANG_TIMEOUT`` (seconds; 0 or unset: off, and then nothing of this runs). When it is on:

- every process the shim starts gets ``MALAUNCH_PROGRESS_FILE``, a file under the attempt's log folder made
  before the ranks start; touching it (a new modification time) counts as output, for a script that prints
  nothing for long on purpose;
- :class:`Silence` looks, from the supervisor's loop (no thread of its own), at the size of each rank's log
  file and the progress file's modification time. The host is *silent* once nothing changed for the timeout;
  before the first sign of life the allowance is :func:`startup_allowance` (imports, rendezvous, data loading).
  Only a rank that runs can be silent: while every worker a launcher started has exited (torchrun's agent still
  closing its store or in its exit barrier, msrun's scheduler still ending), the silent window does not run. Such
  a host's ranks have *ended* (:class:`Signs`): the coordinator counts it neither as silent nor as speaking, so a
  peer whose ranks hang is found after the timeout, not once this host's launcher ends (its exit barrier may
  wait minutes for that very peer).
- A host whose ranks are silent is hung (one host; several hosts agree through the coordinator): the
  supervisor ends the attempt like a failure whose root cause is :func:`hang_failure` (class ``hang``,
  retryable, exit code :data:`~..report.failure_class.EXIT_HANG`).

The looks are ``stat`` calls on the files the shim (or the launcher) already writes: each rank's bytes pass
there, so the time of its last output is known without reading them.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, AbstractSet, Callable, Dict, Mapping, NamedTuple, Optional

from ..contract.errors import LaunchError
from .hang_report import judge, look_ranks
from .procs import proctree

if TYPE_CHECKING:
    from .hang_report import Hung
    from .output import Output
    from .output.sink import Sink
    from .procs.processes import ProcessGroup
    from .workers import Workers

__all__ = ["PROGRESS_NAME", "PROGRESS_VAR", "Signs", "Silence", "hang_line", "hang_verdict",
           "make_progress_file", "rank_pids", "rank_sinks", "startup_allowance"]

PROGRESS_VAR = "MALAUNCH_PROGRESS_FILE"
PROGRESS_NAME = "progress"  # in the attempt's log folder
#: Before the first sign of life, an attempt gets this many times the timeout, and at least this many seconds.
STARTUP_FACTOR = 3.0
STARTUP_MINIMUM = 60.0


def startup_allowance(timeout: float) -> float:
    """How long an attempt may stay silent before its first sign of life: 3 times the timeout, at least 60 s."""
    return max(STARTUP_FACTOR * timeout, STARTUP_MINIMUM)


def make_progress_file(path: str) -> None:
    """Create (empty) the attempt's progress file. Raises :class:`LaunchError`."""
    try:
        with open(path, "wb"):
            pass
    except OSError as error:
        raise LaunchError(f"cannot create the progress file {path!r}: {error.strerror}; point MALAUNCH_LOG_DIR "
                          "(or --log-dir) at a writable directory") from None  # fmt: skip


def rank_sinks(output: Output) -> Dict[object, Sink]:
    """Each rank's log (a launcher's own log is not a rank's); a process without a rank by its name."""
    if output.rank_sinks:
        return {rank: sink for rank, sink in output.rank_sinks.items()}
    return {spec.rank if spec.rank is not None else spec.name: sink for spec, sink in zip(output.specs, output.sinks)}


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


class Signs(NamedTuple):
    """What this host's ranks show: ``silent`` (nothing for the timeout while one runs) or ``ended`` (every worker
    its launcher started has exited, the launcher winds down); never both, neither while a rank speaks."""

    silent: bool
    ended: bool = False


class Silence:
    """When this host's ranks last showed a sign of life (their log files grew, the progress file was touched).

    ``sinks``: rank (or process name) -> its log; ``pids``: each rank's process now (its CPU use is noted at
    each sign of life: the silent window's start); ``running``: whether a rank may still run (False once every
    worker of a launcher has exited: no window runs then). :meth:`look` is called now and then with the monotonic
    clock; :meth:`silent` says whether the host is silent now, :meth:`changed` what it shows when that changed.
    """

    def __init__(self, timeout: float, sinks: Mapping[object, Sink], progress: str, now: float,
                 pids: Callable[[], Mapping[object, int]], running: Callable[[], bool]) -> None:  # fmt: skip
        self.timeout, self.progress, self.started, self.pids, self.running = timeout, progress, now, pids, running
        self.sinks = dict(sinks)
        self.sizes: Dict[object, int] = {key: _size(sink.path) for key, sink in self.sinks.items()}
        self.last: Dict[object, Optional[float]] = {key: None for key in self.sinks}  # each rank's last output
        self.cpu_at: Dict[object, int] = {}  # each rank's CPU ticks at the last sign of life
        self.touched = _mtime(progress)
        self.since = now  # the last sign of life of any rank (or the start)
        self.spoke = False  # any sign of life yet
        self.told = Signs(False)  # what :meth:`changed` last said
        self.gone = False  # every worker seen has exited (at the last look)
        self.looked: Optional[float] = None  # when the last look was
        self.grain = 0.0  # the longest time between two looks: two last outputs this close are equally old

    def look(self, now: float) -> None:
        """Note what changed since the last look."""
        if self.looked is not None:
            self.grain = max(self.grain, now - self.looked)
        self.looked, spoke = now, False
        for key, sink in self.sinks.items():
            size = _size(sink.path)
            if size != self.sizes[key]:
                self.sizes[key], self.last[key], spoke = size, now, True
        touched = _mtime(self.progress)
        if touched != self.touched:
            self.touched, spoke = touched, True
        self.gone = not spoke and not self.running()
        if spoke:
            self.since, self.spoke = now, True
        elif self.gone:  # ranks that have exited are not silent: the window starts again with new ones
            self.since = now
        if spoke or not self.cpu_at:
            usage = {key: proctree.read_usage(pid) for key, pid in self.pids().items()}
            self.cpu_at = {key: found[0] for key, found in usage.items() if found is not None}

    def silent(self, now: float) -> bool:
        """Nothing changed for the timeout (before the first sign of life: for the start-up allowance)."""
        allowed = self.timeout if self.spoke else startup_allowance(self.timeout)
        return now - self.since >= allowed

    def changed(self, now: float) -> Optional[Signs]:
        """Look; what the ranks show when it changed since the last call (went silent, spoke again, all exited),
        else None."""
        self.look(now)
        signs = Signs(False, True) if self.gone else Signs(self.silent(now))
        if signs == self.told:
            return None
        self.told = signs
        return signs

    def quiet_for(self, now: float) -> float:
        """Seconds since the last sign of life of any rank (or the start)."""
        return now - self.since


def hang_line(silent: float, what: str = "no rank of this host") -> str:
    """The shim's line for a hung attempt (:mod:`..report.failure_class` knows it: class ``hang``)."""
    return (f"ma-entrypoint: hung: {what} wrote output or touched {PROGRESS_VAR} for {silent:.0f} s "
            "(MALAUNCH_HANG_TIMEOUT): the attempt ends")  # fmt: skip


def rank_pids(group: ProcessGroup, workers: Workers) -> Dict[object, int]:
    """Each rank's process: a launcher's workers as its watch saw them, else the processes the shim started."""
    seen = workers.pid_ranks()
    if seen:
        return {rank: pid for pid, rank in seen.items()}
    return {spec.rank if spec.rank is not None else spec.name: proc.pid
            for spec, proc in zip(group.specs, group.procs)}  # fmt: skip


def hang_verdict(silence: Silence, pids: Mapping[object, int], output: Output, host: str, line: str,
                 succeeded: AbstractSet[int] = frozenset()) -> Hung:  # fmt: skip
    """The hang report of this host (said on the console) and the run's root cause (:mod:`.hang_report`);
    ``succeeded``: the processes recorded as ended with code 0 (not the cause while a rank runs)."""

    now = time.monotonic()
    lines = {key: (sink.tail(1) or ("",))[-1] for key, sink in silence.sinks.items()}
    ranks = look_ranks(silence.last, silence.cpu_at, pids, lines, now, succeeded)
    logs = {rank.rank: silence.sinks[key].path for key, rank in zip(silence.sinks, ranks)}
    hung = judge(ranks, silence.quiet_for(now), host, logs, line, silence.grain)
    output.say(line[len("ma-entrypoint: "):])
    for rank in ranks:
        output.say(rank.line())
        output.say(f"  stack: {rank.stack}" if rank.stack else f"  no stack: {rank.note}")
    output.say(f"hang root cause on this host: {hung.failure.name}: {hung.failure.why}")
    return hung
