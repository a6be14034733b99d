"""Follow the files torchrun's workers write themselves (``--redirects=3 --log_dir=D``) into the rank logs.

With ``--redirects=3`` torchrun opens, for every worker of every attempt, ``D/<run>/attempt_<K>/<i>/stdout.log``
and ``stderr.log`` (``i`` the local rank) and hands them to the worker as its stdout and stderr: the worker
writes its output there itself, so every byte is in the file the moment it is written, whatever happens to
torchrun. ``<run>`` is made by torchrun with ``tempfile.mkdtemp(prefix=f"{rdzv_run_id}_", dir=D)`` (torch
2.13 ``DefaultLogsSpecs``): a fresh folder per torchrun run whose name the shim cannot know in advance, so the
run folders are the entries of ``D`` that were not there before torchrun started. Each restart of the worker
group (``--max_restarts``) gets the next ``attempt_<K>`` folder in the same run folder.

:class:`TorchrunLogs` finds those files as they appear (every poll) and copies them with
:class:`...run.output.pump.FileFollower` into the rank's ``rank-<N>.log`` (local rank ``i`` is the ``i``-th rank
of this host) at full speed: the follower never waits for the console. The rank log is a
:class:`...run.output.splice.SpliceSink`, so each copied chunk is also a span of that file (stdout or stderr) for
the console copy, which the same read-back reader as under the fan-out
(:meth:`...run.output.splice.SpliceSink.forward`) makes at the console's pace:
whole lines with the ``[rank N] `` prefix, stdout to stdout and stderr to stderr, late rather than lost. An
attempt's files are always read before a later attempt's, so a rank log keeps the attempts in order. A local
rank the plan has no rank for goes to the launcher's log with ``[local rank i] `` (console lines dropped
once the console is 16 MiB behind, as for the launcher's own output).

Elastic attempts (``relabel`` given): the c10d rendezvous numbers the hosts in an order of its own, so the rank
a worker's script sees (``RANK``) need not be its host's place. Each worker's start (:mod:`.stub`) leaves its
``RANK`` in its folder before the script runs; a worker's files are followed only once that note is there (or,
without it, once they hold bytes), and ``relabel(place, rank)`` first names the rank log and the console prefix
of that place by the rank the script sees.
"""

from __future__ import annotations

import os
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Set

from ...run.output.console import Console
from ...run.output.pump import Feed, FileFollower, LineStream, Sink
from ...run.output.readback import CopyFeed, end_copies
from ...run.output.splice import SpliceSink
from .stub import noted_rank

__all__ = ["TorchrunLogs"]

_ATTEMPT = "attempt_"
_STREAMS = ("stdout.log", "stderr.log")


def _entries(path: str) -> List[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _attempt_number(name: str) -> int:
    number = name[len(_ATTEMPT) :]
    return int(number) if name.startswith(_ATTEMPT) and number.isascii() and number.isdigit() else -1


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


class TorchrunLogs(FileFollower):
    """Follows every worker file torchrun writes under ``log_dir`` from now on (see the module docstring).

    Args:
        log_dir: torchrun's ``--log_dir``.
        ranks: this host's global ranks in local-rank order.
        rank_sinks: global rank -> its log (``rank-N.log``), whose
            :meth:`~...run.output.splice.SpliceSink.forward` makes the console copy.
        launcher_sink: where a local rank outside ``ranks`` goes.
        out: the stdout console (for a local rank outside ``ranks``).
        err: the stderr console (for a local rank outside ``ranks``).
        relabel: elastic attempts only: ``relabel(place, rank)`` names the log of this host's place rank
            ``place`` by ``rank``, the rank its worker's script sees (see the module docstring).
    """

    def __init__(
        self,
        log_dir: str,
        ranks: Sequence[int],
        rank_sinks: Mapping[int, SpliceSink],
        launcher_sink: Sink,
        out: Console,
        err: Console,
        relabel: Optional[Callable[[int, int], None]] = None,
    ) -> None:
        super().__init__({}, {})
        self._relabel = relabel
        self.log_dir = log_dir
        self._ranks = list(ranks)
        self._rank_sinks = rank_sinks
        self._launcher = launcher_sink
        self._consoles = (out, err)
        self._before: Set[str] = set(_entries(log_dir))  # run folders of earlier runs are not ours
        self._runs: List[str] = []
        self._attempts: Dict[str, Set[str]] = {}  # attempt folder -> local-rank folders already followed

    def poll(self) -> None:
        """Pick up new run, attempt and worker folders, then forward what was appended."""
        self._discover()
        super().poll()

    def finish(self) -> None:
        """Read what is left, then end every rank log's console copy (its reader drains and stops)."""
        try:
            super().finish()
        finally:
            for sink in self._rank_sinks.values():
                end_copies(sink)

    def _discover(self) -> None:
        for name in sorted(_entries(self.log_dir)):
            if name not in self._before and name not in self._runs and os.path.isdir(os.path.join(self.log_dir, name)):
                self._runs.append(name)
        for run in self._runs:
            folder = os.path.join(self.log_dir, run)
            attempts = sorted((n for n in _entries(folder) if _attempt_number(n) >= 0), key=_attempt_number)
            for attempt in attempts:
                self._discover_workers(os.path.join(folder, attempt))

    def _discover_workers(self, attempt_dir: str) -> None:
        seen = self._attempts.setdefault(attempt_dir, set())
        locals_ = sorted((n for n in _entries(attempt_dir) if n.isascii() and n.isdigit()), key=int)
        for local in locals_:
            if local in seen:
                continue
            if self._relabel is not None and not self._named(os.path.join(attempt_dir, local), int(local)):
                continue  # its worker has not started yet: look again at the next poll
            seen.add(local)
            for stream, (name, console) in enumerate(zip(_STREAMS, self._consoles)):
                self.add(os.path.join(attempt_dir, local, name), self._destination(int(local), stream, console))

    def _named(self, folder: str, local: int) -> bool:
        """Elastic: whether the worker in ``folder`` can be followed (its rank is noted, or it wrote without a
        note); its place's log is named by the noted rank first."""
        rank = noted_rank(folder)
        if rank is None:
            return any(_size(os.path.join(folder, name)) > 0 for name in _STREAMS)
        if local < len(self._ranks) and self._relabel is not None:
            self._relabel(self._ranks[local], rank)
        return True

    def _destination(self, local: int, stream: int, console: Console) -> Feed:
        if local < len(self._ranks) and self._ranks[local] in self._rank_sinks:
            return CopyFeed(self._rank_sinks[self._ranks[local]], stream)
        return LineStream(console, b"[local rank %d] " % local, self._launcher)
