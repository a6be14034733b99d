"""How a run ended (:class:`RunResult`, its root-cause :class:`Failure`), as launchers report it and as we do.

The supervisor fills in a ``RunResult`` (the launchers' own failure reports are read by their launcher modules).
:func:`describe_exit` explains an exit code (137 -> likely OOM), :func:`format_failure` is the block the shim
prints after a failure (who failed, where, how, its log path and its last lines: never torchrun's bare
``error_file: <N/A>``), :func:`report_json` is the machine-readable report, which says from which byte each log
file lost output. Its file on disk (the room set aside before the run, the atomic write that never crashes the
shim) is :mod:`.reportfile`'s.
"""


from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Tuple

from ..contract.errors import EXIT_CONFIG, EXIT_LAUNCH, PROG
from ..contract.signals import signal_hint, signal_in_shell_code, signal_name
from .causetext import shim_line

if TYPE_CHECKING:
    from ..plan.launch_plan import LaunchPlan

__all__ = [
    "REPORT_VERSION",
    "Failure",
    "LauncherAttempt",
    "LostOutput",
    "RunResult",
    "describe_exit",
    "describe_failure_exit",
    "format_failure",
    "rank_unknown",
    "report_json",
    "signal_name",
]

REPORT_VERSION = 1


class Failure(NamedTuple):
    """The root cause of a failed run: the first process (or rank) that failed."""

    name: str
    rank: Optional[int]
    local_rank: Optional[int]
    host: str
    pid: Optional[int]
    exit_code: int  # shell-style: the code, or 128+N for death by signal N
    signal: Optional[int]  # N when killed by a signal
    log_file: str
    tail: Tuple[str, ...]  # the last lines of that rank's output
    message: Optional[str] = None  # the exception its TORCHELASTIC_ERROR_FILE recorded, if any
    source: str = "exit"  # which fact named it: exit, watch, summary, error_file (see rootcause); peer, lost
    why: Optional[str] = None  # the rule (and the evidence) that made it the root cause (see rootcause)
    # a multi-host job: the job's coordinator's own words on how it chose this cause among the hosts' (a hang's
    # equal evidence); the summary's own line, never one of the rank's output (the report keeps it in job_cause)
    chosen: Optional[str] = None


class LauncherAttempt(NamedTuple):
    """One attempt a launcher made inside one run: torchrun restarting its workers itself (``--max_restarts``),
    or one process relaunched alone (MindSpore recovery)."""

    attempt: int  # its TORCHELASTIC_RESTART_COUNT
    root_cause: Optional[Failure]  # None: no worker of this attempt failed
    duration: float  # from the end of the previous attempt (or the start) to this one's last worker death
    log_dir: str  # torchrun's folder for this attempt (``.../attempt_<n>``), else the plan's log directory
    restarted: bool = False  # the launcher started it again (the one not restarted ended the run)


class LostOutput(NamedTuple):
    """A log file that could not be written to the end: it holds the output up to ``from_byte``."""

    log_file: str
    from_byte: int
    reason: str  # the error, e.g. "No space left on device"


class RunResult(NamedTuple):
    """How a run ended. ``exit_code`` is what the shim exits with."""

    exit_code: int  # 0 on success; the root cause's own code; 128+S if the shim got signal S
    root_cause: Optional[Failure]
    shim_signal: Optional[int]
    duration: float
    # every attempt the launcher made inside this run, oldest first (the one not restarted is this result)
    launcher_attempts: Tuple[LauncherAttempt, ...] = ()
    lost_output: Tuple[LostOutput, ...] = ()  # log files that failed part-way (a full disk)
    # the run was found hung (MALAUNCH_HANG_TIMEOUT): each rank's hang report, and the evidence for its root
    # cause (0: none, the rank silent longest was named; run/hang_report.py)
    hang: Tuple[Dict[str, Any], ...] = ()
    hang_score: int = 0
    seen_at: Optional[float] = None  # when this host saw the run's first failure (seconds since the epoch)


_CODE_HINTS = {
    0: "success",
    1: "generic error: the traceback is usually in the last lines of the log",
    2: "usage error: bad command-line arguments",
    126: "the command was found but cannot be executed (permissions?)",
    127: "command not found (check PATH)",
    124: "timed out: the job hung (no output for MALAUNCH_HANG_TIMEOUT s, see the hang report), a prepare step "
    "outlived MALAUNCH_PREPARE_TIMEOUT, or a timeout",
}


#: What the shim's own exit codes mean when the root cause is the shim itself (a host that refused to start its
#: ranks, ``name`` :data:`~..contract.errors.PROG`, no rank): its line, the last of the tail, says what and what to do.
_SHIM_HINTS = {
    EXIT_CONFIG: "the shim refused its input (its line below says what, and what to do)",
    EXIT_LAUNCH: "the shim could not go on with the launch (its line below says why)",
}


def describe_failure_exit(failure: Failure) -> str:
    """:func:`describe_exit` of a root cause; the shim's own refusal is not called a usage error of a script."""
    if failure.rank is None and failure.name == PROG and failure.signal is None and failure.exit_code in _SHIM_HINTS:
        return _SHIM_HINTS[failure.exit_code]
    return describe_exit(failure.exit_code, failure.signal)


def describe_exit(code: int, signal: Optional[int]) -> str:
    """A one-line explanation of an exit code, e.g. 137 -> "killed by SIGKILL: likely out of memory ..."."""
    sig = signal_in_shell_code(code, signal)
    if sig is not None:
        hint = signal_hint(sig)
        return f"killed by {signal_name(sig)}: {hint}" if hint else f"killed by {signal_name(sig)}"
    return _CODE_HINTS.get(code, f"exited with code {code}; see the last lines of the log")


def rank_unknown(failure: Failure) -> bool:
    """``failure`` is a launcher's worker the launcher named by pid whose rank the shim could not read (its name
    says so, its ``log_file`` is the folder of the ranks' logs, it has no tail): never the launcher itself."""
    return failure.rank is None and failure.source == "summary"


def _who(failure: Failure) -> str:
    if failure.rank is None and failure.name.startswith("prepare step "):  # a prepare step, on this host or another
        return failure.name
    if rank_unknown(failure):
        return failure.name
    if failure.rank is None:
        return f"process {failure.name}"
    local = f" (local rank {failure.local_rank})" if failure.local_rank is not None else ""
    return f"rank {failure.rank}{local}"


def format_failure(result: RunResult) -> str:
    """A multi-line human report of how the run ended."""
    failure = result.root_cause
    took = f"{result.duration:.1f}s"
    if failure is None:
        if result.shim_signal is not None:
            name = signal_name(result.shim_signal)
            return (
                f"The job was stopped after {took}: the shim received {name} and terminated every process "
                f"(exit code {result.exit_code})."
            )
        if result.exit_code == 0:
            return f"The job succeeded after {took}."
        return f"The job failed after {took} with exit code {result.exit_code}."
    if failure.source == "lost":
        return _format_lost(failure, took, result.exit_code)
    pid = f", pid {failure.pid}" if failure.pid is not None else ""
    lines: List[str] = [
        f"The job failed after {took}. Root cause: {_who(failure)} on host {failure.host}{pid}",
        f"  exit code : {failure.exit_code} ({describe_failure_exit(failure)})",
    ]
    if failure.signal is not None:
        lines.append(f"  signal    : {failure.signal} ({signal_name(failure.signal)})")
    if failure.message:
        lines.append(f"  error     : {failure.message}")
    if failure.why and "after a peer" in failure.why:
        lines.append(f"  why       : {failure.why}")
    if failure.chosen:
        lines.append(f"  chosen    : {failure.chosen}")
    if rank_unknown(failure):
        lines.append(f"  log file  : its rank's, in {failure.log_file} (it ended before its rank could be read)")
    else:
        lines.append(f"  log file  : {failure.log_file}")
    if failure.tail:
        count = len(failure.tail)
        lines.append(f"  last {count} line{'' if count == 1 else 's'} of its output:")
        lines.extend(f"    | {_shown(line)}" for line in failure.tail)
    elif not rank_unknown(failure):
        lines.append("  (it wrote no output)")
    if result.shim_signal is not None:
        lines.append(f"  (the shim also received {signal_name(result.shim_signal)} while stopping the job)")
    return "\n".join(lines)


#: The most of one output line the console's failure summary shows (report.json and the log keep it whole).
_TAIL_LINE_SHOWN = 1000


def _shown(line: str) -> str:
    """``line`` as the summary shows it: a line longer than :data:`_TAIL_LINE_SHOWN` by its end, where an error's
    last words are, with how much comes before."""
    if len(line) <= _TAIL_LINE_SHOWN:
        return line
    before = len(line) - _TAIL_LINE_SHOWN
    return f"[{before:,} characters before; the whole line is in the log] " + line[-_TAIL_LINE_SHOWN:]


_LOST_HINT = "lost: its shim vanished or stopped answering the job's coordinator; its own end is not known here"


def _format_lost(failure: Failure, took: str, code: int) -> str:
    """The report of a job whose root cause is a host the coordinator found lost (``source`` ``lost``): its own
    exit code is not known here; ``code`` is what this shim exits with for it."""

    said = shim_line(failure.tail[-1]) if failure.tail else f"{failure.name} ({failure.host}) lost"
    logs = failure.log_file or f"on {failure.name} ({failure.host}); its shim did not say where"
    return "\n".join([
        f"The job failed after {took}. Root cause: {said}",
        f"  its end   : {_LOST_HINT}",
        f"  its logs  : {logs}",
        f"  this host : exits {code}, the code of a job that lost a host",
    ])  # fmt: skip


def _failure_json(failure: Failure) -> Dict[str, Any]:
    return {
        "name": failure.name,
        "rank": failure.rank,
        "local_rank": failure.local_rank,
        "host": failure.host,
        "pid": failure.pid,
        "exit_code": failure.exit_code,
        "signal": failure.signal,
        "signal_name": signal_name(failure.signal) if failure.signal is not None else None,
        "hint": _LOST_HINT if failure.source == "lost" else describe_failure_exit(failure),
        "log_file": failure.log_file,
        "message": failure.message,
        "source": failure.source,
        "why": failure.why,
        "tail": list(failure.tail),
    }


def report_json(result: RunResult, plan: "LaunchPlan") -> Dict[str, Any]:
    """The JSON run report: status, exit code, root cause (with its tail) and where the logs are."""
    if result.root_cause is not None:
        status = "failed"
    elif result.shim_signal is not None:
        status = "stopped"
    else:
        status = "succeeded" if result.exit_code == 0 else "failed"
    return {
        "version": REPORT_VERSION,
        "status": status,
        "exit_code": result.exit_code,
        "hint": describe_exit(result.exit_code, None) if result.exit_code else None,
        "duration": round(result.duration, 3),
        "shim_signal": result.shim_signal,
        "shim_signal_name": signal_name(result.shim_signal) if result.shim_signal is not None else None,
        "root_cause": _failure_json(result.root_cause) if result.root_cause is not None else None,
        "method": plan.method,
        "host": plan.host,
        "node_rank": plan.node_rank,
        "num_hosts": plan.num_hosts,
        "log_dir": plan.log_dir,
        "rank_logs": {str(rank): path for rank, path in sorted(plan.rank_logs.items())},
        "processes": [proc.name for proc in plan.processes],
        "lost_output": [lost._asdict() for lost in result.lost_output],
        **({"hang": list(result.hang)} if result.hang else {}),
    }
