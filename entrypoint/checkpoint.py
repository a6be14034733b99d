"""Checkpoints for training scripts: the newest complete one, a save every rank takes part in, and progress.

Standard library only; it ships with the shim, so ``from malaunch.entrypoint import checkpoint`` works in any
image that has the shim. It follows the contract the shim keeps (``MALAUNCH_CHECKPOINT_DIR``,
``MALAUNCH_RESUME_FROM``; the layout in :mod:`.contract.checkpoint_dir`)::

    from malaunch.entrypoint import checkpoint

    start = 0
    resume = checkpoint.resume_from()          # None on the first attempt
    if resume:
        state = torch.load(f"{resume}/rank-{rank}.pt"); start = state["step"]
    for step in range(start, total):
        train(step)
        checkpoint.progress(step + 1, total)
        if (step + 1) % every == 0:
            with checkpoint.save(step + 1) as folder:   # every rank writes its own part
                torch.save(state, f"{folder}/rank-{rank}.pt")

:func:`save` marks the checkpoint complete only once every rank of the job has finished its part: each rank, as
its ``with`` block ends without an error, leaves a file in the checkpoint's ``.parts`` folder naming its step, its
attempt and the job's number of ranks; the rank that then finds every rank's part of this attempt there writes
``.complete`` (through a hard link, so exactly one rank does, and whole). Where each host's folder is its own
(ModelArts: one output channel per node), no rank finds them all: each host's shim tells the job's coordinator
which parts its folder holds, and writes ``.complete`` there once the hosts together hold every rank's part
(:mod:`.run.hosts.saves`). No collective of the training framework is used, so it works the same for
``torch.save``, torch's distributed checkpoint and MindSpore's ``ModelCheckpoint``. A rank killed in the middle
leaves the folder incomplete on every host: the shim never offers it, and the next attempt resumes from the one
before.

:func:`progress` touches ``MALAUNCH_PROGRESS_FILE`` when hang detection is on (a step counts as output) and
records the rank's step in ``$MALAUNCH_PROGRESS_DIR/rank-<R>.json`` (every job: :mod:`.run.progress`), where
``ma-submit status`` and ``top`` and the shim's time-to-recover record read it, and, with a checkpoint folder,
in ``<checkpoint folder>/.progress/rank-<R>.json`` too, where the shim reads it between attempts (its console
line says how far the last attempt got).

The rank and the number of ranks are ``RANK``/``WORLD_SIZE`` (torchrun, the fan-out), else ``RANK_ID``/
``RANK_SIZE`` (MindSpore), else 0 and 1.
"""

from __future__ import annotations

import contextlib
import json
import operator
import os
import shutil
import time
from typing import Iterator, List, Mapping, NamedTuple, Optional, Tuple

from .contract.checkpoint_dir import MARKER, PARTS, PROGRESS, Marker, marker_text, newest, read_marker, records, scan
from .report.atomicfile import write_atomic
from .run.progress import PROGRESS_DIR_VAR, WINDOW, record_text

__all__ = ["Checkpoint", "directory", "folder_name", "latest", "progress", "rank_and_size", "resume_from", "save"]

DIR_VAR = "MALAUNCH_CHECKPOINT_DIR"
RESUME_VAR = "MALAUNCH_RESUME_FROM"
PROGRESS_VAR = "MALAUNCH_PROGRESS_FILE"
#: What tells one attempt's parts from another's (the shim's attempt, then torchrun's own restart count).
_ATTEMPT_VARS = ("MALAUNCH_ATTEMPT", "MALAUNCH_TORCHRUN_RESTART_COUNT")


class Checkpoint(NamedTuple):
    """A complete checkpoint: its folder, its name, and the step and time its ``.complete`` records."""

    path: str
    name: str
    step: int
    time: float


def directory(environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The job's checkpoint folder (``MALAUNCH_CHECKPOINT_DIR``), or None when the job has none."""
    return (os.environ if environ is None else environ).get(DIR_VAR) or None


def folder_name(step: int) -> str:
    """The sub-folder :func:`save` uses for ``step`` (sorts by step: ``step-00000040``)."""
    return f"step-{step:08d}"


def latest(folder: Optional[str] = None) -> Optional[Checkpoint]:
    """The newest complete checkpoint in ``folder`` (default: the job's), or None."""
    where = folder if folder is not None else directory()
    if where is None:
        return None
    best = newest(scan(where))
    if best is None or best.marker is None:
        return None
    return Checkpoint(best.path, best.name, best.marker.step, best.marker.time)


def resume_from(environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The folder to resume from: ``MALAUNCH_RESUME_FROM`` as the shim set it, else the newest complete one, else
    None (start from the beginning)."""
    env = os.environ if environ is None else environ
    given = env.get(RESUME_VAR)
    if given:
        return given
    found = latest(directory(env))
    return found.path if found is not None else None


def rank_and_size(environ: Optional[Mapping[str, str]] = None) -> Tuple[int, int]:
    """This process's rank and the job's number of ranks (see the module's docstring)."""
    env = os.environ if environ is None else environ
    for rank_var, size_var in (("RANK", "WORLD_SIZE"), ("RANK_ID", "RANK_SIZE")):
        if env.get(rank_var, "").isdigit() and env.get(size_var, "").isdigit():
            return int(env[rank_var]), int(env[size_var])
    return 0, 1


def _attempt(env: Mapping[str, str]) -> str:
    """``"K.R"``: the shim's attempt, then torchrun's own count (the stub keeps it; a worker of a torchrun that
    restarts by itself, started without the stub, has it as its ``TORCHELASTIC_RESTART_COUNT``)."""
    shim, launcher = (env.get(name, "0") or "0" for name in _ATTEMPT_VARS)
    if _ATTEMPT_VARS[1] not in env and env.get("TORCHELASTIC_RUN_ID"):
        launcher = env.get("TORCHELASTIC_RESTART_COUNT", "0") or "0"
    return f"{shim}.{launcher}"


@contextlib.contextmanager
def save(step: int, folder: Optional[str] = None, *, rank: Optional[int] = None, ranks: Optional[int] = None,
         environ: Optional[Mapping[str, str]] = None) -> Iterator[str]:  # fmt: skip
    """Save checkpoint ``step``: yields its folder (``<checkpoint folder>/step-<N>``, made) for this rank's part.

    When the block ends without an error, this rank's part is recorded; the rank that finds every rank's part of
    this attempt writes ``.complete`` (see the module's docstring). An error in the block records nothing. A
    damaged ``.complete`` of that step (never offered to resume from) is removed as the save begins, so that the
    save can complete.

    Args:
        step: the step the checkpoint holds (``.complete`` records it; the newest is the largest): an ``int``, or
            numpy's or torch's integer scalar.
        folder: the checkpoint folder (default: ``MALAUNCH_CHECKPOINT_DIR``).
        rank, ranks: this rank and the number of ranks (default: from the environment).

    Raises:
        ValueError: no checkpoint folder, a bad step, or that step's checkpoint is complete already.
        OSError: this rank's part or the marker could not be written (a full disk): the save is not complete, and
            the message says which checkpoint and what to do.
    """
    env = os.environ if environ is None else environ
    where = folder if folder is not None else directory(env)
    if where is None:
        raise ValueError(f"no checkpoint folder: {DIR_VAR} is unset; add a checkpoint: section to the job file, "
                         "or pass folder=")  # fmt: skip
    step = _whole("step", step)
    found_rank, found_size = rank_and_size(env)
    me = found_rank if rank is None else rank
    size = found_size if ranks is None else ranks
    target = os.path.join(where, folder_name(step))
    marker = read_marker(target)
    if isinstance(marker, Marker):
        raise ValueError(f"checkpoint {target} is complete already; save each step once (resume from "
                         f"{RESUME_VAR})")  # fmt: skip
    os.makedirs(os.path.join(target, PARTS), exist_ok=True)
    if marker is not None:  # damaged: never offered, so this save replaces it (else it could never complete)
        _remove_marker(target)
    yield target
    attempt = _attempt(env)
    part = {"step": step, "attempt": attempt, "rank": me, "ranks": size}
    what = f"rank {me}'s part could not be recorded"
    try:
        write_atomic(os.path.join(target, PARTS, f"rank-{me}"), json.dumps(part) + "\n")
        what = f"its {MARKER} could not be written"
        if _parts_done(target, step, attempt, size):
            _write_marker(target, step, size, me)
    except OSError as error:  # a full disk, say: which save, what, and what to do, not a bare "[Errno 28] ..."
        raise OSError(error.errno, f"checkpoint {target} (step {step}) is not complete: {what} "
                      f"({error.strerror or error}): fix the checkpoint folder's file system (full? read-only?); "
                      "the next attempt resumes from the newest complete checkpoint") from error  # fmt: skip


def _whole(what: str, value: object, optional: bool = False) -> int:
    """``value`` as a whole number >= 0: an ``int``, or an integer scalar of another library (numpy's ``int64``, a
    one-element integer tensor: anything with ``__index__``), never a bool.

    Raises:
        ValueError: anything else (None too), with its value and type; ``optional``: the message says that None is
            allowed (the caller passes None on itself).
    """
    number = -1
    if not isinstance(value, bool):
        with contextlib.suppress(TypeError):
            number = operator.index(value)  # type: ignore[arg-type]
    if number < 0:
        allowed = " or None" if optional else ""
        raise ValueError(f"{what} must be a whole number >= 0{allowed}, not {value!r} ({type(value).__name__}): "
                         f"pass the {what} as an int")  # fmt: skip
    return number


def _remove_marker(target: str) -> None:
    """Remove ``target``'s damaged ``.complete`` (a file, or a folder by that name); gone already is no error.
    No rank can have written a whole one since it was read: that needs this rank's part."""
    path = os.path.join(target, MARKER)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _parts_done(target: str, step: int, attempt: str, size: int) -> bool:
    """Whether every rank's part of this attempt's save of ``step`` is recorded."""
    done = {value.get("rank") for value in records(os.path.join(target, PARTS), prefix="rank-")
            if value.get("step") == step and value.get("attempt") == attempt}  # fmt: skip
    return done >= set(range(size))


def _write_marker(target: str, step: int, size: int, rank: int) -> None:
    """Write ``.complete`` whole, once: a finished temporary file linked to its name (a rank that finds it made by
    another leaves it)."""
    temp = os.path.join(target, f".complete-{rank}-{os.getpid()}.tmp")
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            handle.write(marker_text(step, time.time(), size))
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(temp, os.path.join(target, MARKER))
    finally:
        with contextlib.suppress(OSError):  # a write that failed leaves no temporary file either
            os.unlink(temp)


class _Window:
    """This process's recent progress calls: the points a rate is measured from (about one a second, at most
    :data:`~.run.progress.WINDOW` seconds back, two at least) and its first call."""

    def __init__(self) -> None:
        self.points: List[Tuple[float, int]] = []
        self.first: Optional[float] = None

    def add(self, now: float, step: int) -> Tuple[int, float]:
        """Note ``step`` at ``now``; the step and time the window starts at."""
        if self.first is None:
            self.first = now
        if self.points and step < self.points[-1][1]:  # the step went back (a resume): a new window
            self.points.clear()
        if not self.points or now - self.points[-1][0] >= _POINT_EVERY:
            self.points.append((now, step))
        while len(self.points) > 2 and now - self.points[0][0] > WINDOW:
            del self.points[0]
        return self.points[0][1], self.points[0][0]


_WINDOW = _Window()
_POINT_EVERY = 1.0  # seconds between two points of the window (a fast loop keeps a few dozen)


def progress(step: int, total: Optional[int] = None, *, environ: Optional[Mapping[str, str]] = None) -> None:
    """Record that this rank reached ``step`` (of ``total``): a sign of life for hang detection, and the step
    ``ma-submit status`` and ``top`` show and the shim reads (see the module's docstring). Works with or without a
    checkpoint folder. Never raises for a folder it cannot write.

    Raises:
        ValueError: ``step`` (or ``total``, when given) is not a whole number >= 0: an ``int``, or numpy's or
            torch's integer scalar.
    """
    env = os.environ if environ is None else environ
    step = _whole("step", step)
    total = None if total is None else _whole("total", total, optional=True)
    touch = env.get(PROGRESS_VAR)
    if touch:
        with contextlib.suppress(OSError):
            os.utime(touch)
    now = time.time()
    since = _WINDOW.add(now, step)
    first = _WINDOW.first if _WINDOW.first is not None else now
    rank, _ = rank_and_size(env)
    text = record_text(rank, step, total, now, first, _attempt(env), (since[0], since[1]))
    for folder in (env.get(PROGRESS_DIR_VAR), _progress_in(directory(env))):
        if folder:
            with contextlib.suppress(OSError):
                write_atomic(os.path.join(folder, f"rank-{rank}.json"), text)


def _progress_in(checkpoints: Optional[str]) -> Optional[str]:
    return os.path.join(checkpoints, PROGRESS) if checkpoints else None
