"""The hang report: per rank, where it is and what it did while the host was silent; and which rank is the cause.

For each rank of the host (:func:`look_ranks`): its process state from ``/proc`` (running, sleeping, stopped,
disk wait, zombie; through :mod:`.procs.proctree`, the one ``/proc`` reader), the CPU seconds it used in the silent
window, the seconds since its last line and that line, and its Python stack from ``py-spy dump --pid`` when
``py-spy`` is on PATH (each dump bounded in time), else a note saying why there is none.

The root cause is the rank that is not where the others are (:func:`stand_out`, pure), by this evidence, the
strongest first: stopped (SIGSTOP, a debugger), a zombie, in disk wait, spinning (it used at least
:data:`SPIN_SHARE` of a CPU in the silent window while printing nothing). With no such evidence, or several
ranks with the same, the rank silent longest is named, and the report says so; but ranks whose last outputs the
shim saw within two looks at their logs of each other (about a second) are silent equally long (which spoke
first is arrival timing, not a fact the looks can tell), and the lowest of them is named, the rule between hosts
too. In a
multi-host job each host sends its evidence (``score``) with its account, and the coordinator prefers the
strongest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import AbstractSet, Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ..report.failure_class import EXIT_HANG
from ..report.report import Failure
from .procs import proctree

__all__ = [
    "NOT_SEEN", "SPIN_SHARE", "Hung", "RankHang", "judge", "look_ranks", "py_spy_stack", "stand_out", "state_name",
]  # fmt: skip

#: A silent rank that used at least this share of one CPU in the silent window is spinning.
SPIN_SHARE = 0.1
#: At most this long for one ``py-spy dump``, and for all of them together.
STACK_SECONDS = 5.0
STACKS_SECONDS = 15.0
_STATES = {"R": "running", "S": "sleeping", "D": "disk wait", "T": "stopped", "t": "stopped (traced)",
           "Z": "zombie", "X": "dead", "I": "idle"}  # fmt: skip
#: The state of a rank whose process the shim never saw (under a launcher, one that ended before the worker
#: watch's first look): nothing is known of it, so it is no evidence; while another rank runs it is not the cause
#: (the launcher would have ended the group had it failed).
NOT_SEEN = "not seen"
_ROUNDING = 0.002  # silences are kept to the millisecond: two seen at the same look may differ by that
#: Ranks whose last outputs the shim saw within this many looks at their logs of each other are equally silent:
#: one look either side is what the looks cannot order (a rank's bytes reach its log a moment after it wrote them).
_LOOKS = 2
_SCORES = {"stopped": 4, "stopped (traced)": 4, "zombie": 3, "dead": 3, "gone": 3, "disk wait": 2}
_LINE = 200


def state_name(code: Optional[str]) -> str:
    """A ``/proc/<pid>/stat`` state letter in words (None: the process is gone)."""
    if code is None:
        return "gone"
    return _STATES.get(code, code)


class RankHang(NamedTuple):
    """One rank at the moment its host was found hung."""

    rank: str  # "rank N", or the process's name
    pid: Optional[int]
    state: str  # running, sleeping, stopped, disk wait, zombie, gone; exited (it ended by itself with code 0);
    # not seen (no process known for it)
    cpu: Optional[float]  # CPU seconds used in the silent window (None: unknown)
    silent: Optional[float]  # seconds since its last output (None: it wrote nothing)
    last_line: str
    stack: Optional[str]  # py-spy's dump
    note: str  # why there is no stack

    def to_json(self) -> Dict[str, Any]:
        return {"rank": self.rank, "pid": self.pid, "state": self.state, "cpu_seconds": self.cpu,
                "seconds_since_output": self.silent, "last_line": self.last_line, "stack": self.stack,
                "stack_note": self.note}  # fmt: skip

    def line(self) -> str:
        cpu = f"{self.cpu:.1f} s CPU" if self.cpu is not None else "CPU unknown"
        last = (f"last output {self.silent:.1f} s ago: {self.last_line!r}" if self.silent is not None
                else "no output yet")  # fmt: skip
        pid = f"pid {self.pid}" if self.pid is not None else "pid unknown"
        if self.state == "exited":  # its end is the fact: it used no CPU of the silent window it is not in
            return f"hang report: {self.rank} ({pid}): exited with code 0, {last}"
        return f"hang report: {self.rank} ({pid}): {self.state}, {cpu} in the silent window, {last}"


class Hung(NamedTuple):
    """A run found hung: its root cause, each rank's report, and the evidence for the cause (``score``)."""

    failure: Failure
    ranks: Tuple[RankHang, ...]
    score: int


def _label(key: object) -> str:
    return f"rank {key}" if isinstance(key, int) else str(key)


def look_ranks(last: Mapping[object, Optional[float]], cpu_at: Mapping[object, int], pids: Mapping[object, int],
               lines: Mapping[object, str], now: float,
               succeeded: AbstractSet[int] = frozenset()) -> List[RankHang]:  # fmt: skip
    """Each rank as it is now: ``last`` its last output (monotonic), ``cpu_at`` its CPU ticks when the silent
    window began, ``pids`` its process, ``lines`` its last line; ``succeeded``: the processes recorded as ended
    with code 0 (such a rank is ``exited``, never the hang's cause while another runs)."""
    tick = os.sysconf("SC_CLK_TCK")
    tool = shutil.which("py-spy")
    until = time.monotonic() + STACKS_SECONDS
    found: List[RankHang] = []
    for key, seen in last.items():
        pid = pids.get(key)
        if pid is not None and pid in succeeded:
            found.append(RankHang(_label(key), pid, "exited", None, None if seen is None else round(now - seen, 3),
                                  lines.get(key, "")[:_LINE], None, "it exited with code 0"))  # fmt: skip
            continue
        if pid is None:
            found.append(RankHang(_label(key), None, NOT_SEEN, None, None if seen is None else round(now - seen, 3),
                                  lines.get(key, "")[:_LINE], None, "the shim never saw its process"))  # fmt: skip
            continue
        info = proctree.read_info(pid)
        usage = proctree.read_usage(pid)
        cpu = round((usage[0] - cpu_at[key]) / tick, 2) if usage is not None and key in cpu_at else None
        stack, note = py_spy_stack(tool, pid, until) if info is not None and not info.zombie else (None, "not running")
        found.append(RankHang(_label(key), pid, state_name(info.state if info else None), cpu,
                              None if seen is None else round(now - seen, 3), lines.get(key, "")[:_LINE], stack, note))
    return found


def py_spy_stack(tool: Optional[str], pid: Optional[int], until: float) -> Tuple[Optional[str], str]:
    """``py-spy dump --pid PID`` (bounded: :data:`STACK_SECONDS`, and the report's deadline ``until``)."""
    if tool is None:
        return None, "py-spy is not on PATH: install it in the image for Python stacks (pip install py-spy)"
    left = min(STACK_SECONDS, until - time.monotonic())
    if pid is None or left <= 0:
        return None, "no time left for a stack"
    try:
        done = subprocess.run([tool, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=left,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, f"py-spy took longer than {left:.0f} s"
    except OSError as error:
        return None, f"py-spy could not run: {error.strerror or error}"
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return None, f"py-spy failed: {why[:_LINE]} (the platform may not allow ptrace: add SYS_PTRACE)"
    return done.stdout.strip()[:8000], ""


def _score(rank: RankHang, window: float) -> int:
    if rank.state in _SCORES:
        return _SCORES[rank.state]
    return 1 if rank.cpu is not None and rank.cpu >= SPIN_SHARE * window else 0


def _evidence(rank: RankHang, window: float) -> str:
    if _score(rank, window) == 1:
        return f"spinning: it used {rank.cpu:.1f} s of CPU in the {window:.0f} s silent window, printing nothing"
    return f"it is {rank.state}"


def stand_out(ranks: Sequence[RankHang], window: float,
              grain: float = 0.0) -> Tuple[Optional[RankHang], int, str]:  # fmt: skip
    """The rank that is not where the others are, its evidence (0: none) and how it was chosen; a rank that
    exited with code 0, or whose process was never seen, is chosen only when every rank is such. Among ranks with
    the same evidence, the one silent longest, unless another's last output came within two looks of the shim at
    the logs of its (``grain``: the longest time between two looks, :attr:`~.hang.Silence.grain`): which of them
    came first is arrival timing, no fact, and the lowest of those ranks is named. Pure."""
    if not ranks:
        return None, 0, "no rank to look at"
    looked = [rank for rank in ranks if rank.state not in ("exited", NOT_SEEN)] or list(ranks)
    scores = [_score(rank, window) for rank in looked]
    best = max(scores)
    top = [rank for rank, score in zip(looked, scores) if score == best]
    equal = sorted(_equal(top, _LOOKS * grain), key=lambda rank: _rank_order(rank, looked))
    longest = equal[0]
    others = [rank for rank, score in zip(looked, scores) if score < best]
    others += [rank for rank in ranks if rank not in looked]
    if len(looked) == 1:
        which = "the only rank of this host" if len(ranks) == 1 else "the only rank of this host that did not exit"
        return longest, best, f"{which}: {_evidence(longest, window)}"
    if best and len(top) == 1:
        rest = f" while the other ranks of this host are {_states(others)}" if others else ""
        return longest, best, f"{longest.rank} is not where the others are: {_evidence(longest, window)}{rest}"
    rule = "the one silent longest is named"
    if len(equal) > 1:
        names = ", ".join(rank.rank.removeprefix("rank ") for rank in equal)
        when = f"within two looks at the logs ({_LOOKS * grain:.1f} s) of each other" if grain else "together"
        rule = f"ranks {names} were silent equally long (their last output came {when}): the lowest is named"
    if best:
        return longest, best, f"{len(top)} ranks show the same evidence ({_evidence(longest, window)}); {rule}"
    return longest, 0, f"no rank stands out (none stopped, in disk wait or spinning: all wait); {rule}"


def _silence(rank: RankHang) -> float:
    return -1.0 if rank.silent is None else rank.silent  # one that wrote nothing is taken as the least silent


def _equal(ranks: Sequence[RankHang], within: float) -> List[RankHang]:
    """The ranks silent longest among ``ranks``: the longest, and every one whose last output came ``within``
    seconds of its."""
    longest = max(_silence(rank) for rank in ranks)
    return [rank for rank in ranks if _silence(rank) >= longest - within - _ROUNDING]


def _rank_order(rank: RankHang, ranks: Sequence[RankHang]) -> Tuple[int, int]:
    """The lowest rank first (a process without a rank after every rank, in the order the ranks are listed)."""
    number = rank.rank.removeprefix("rank ")
    return (0, int(number)) if number.isdigit() else (1, ranks.index(rank))


def _states(ranks: Sequence[RankHang]) -> str:
    return ", ".join(sorted({rank.state for rank in ranks}))


def judge(ranks: Sequence[RankHang], window: float, host: str, logs: Mapping[str, str], line: str,
          grain: float = 0.0) -> Hung:  # fmt: skip
    """The run's verdict once found hung: the root cause is the rank :func:`stand_out` names (``logs``: each
    rank's log file, by label; ``grain``: the longest time between two looks at them); its tail ends with the
    shim's ``line`` (class ``hang``)."""
    chosen, score, why = stand_out(ranks, window, grain)
    name = chosen.rank if chosen is not None else "every rank"
    rank = int(name[5:]) if name.startswith("rank ") and name[5:].isdigit() else None
    tail = tuple(item for item in (chosen.last_line if chosen else "", f"{name}: {why}", line) if item)
    failure = Failure(name=name, rank=rank, local_rank=None, host=host, pid=chosen.pid if chosen else None,
                      exit_code=EXIT_HANG, signal=None, log_file=logs.get(name, ""), tail=tail, source="hang",
                      why=why)  # fmt: skip
    return Hung(failure, tuple(ranks), score)
