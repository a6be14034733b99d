"""Exit-code classes: what kind of failure ended a run, and whether starting it again can help.

One pure, standard-library-only home for the classification, used by the shim (its report, its restart loop)
and by the SDK (``ma-submit status``, every backend). :func:`classify_failure` looks at an exit code, the
signal, where the code came from and the last lines of the failing rank's log:

=====================  =========  ==========================================================================
class                  retryable  when
=====================  =========  ==========================================================================
``collective_timeout``  yes       the log tail has an NCCL watchdog, gloo send/recv or HCCL notify timeout
``rendezvous_timeout``  yes       the log tail has a rendezvous, store or connection failure (torch
                                  ``DistStoreError``/``DistNetworkError``, gloo "connection closed by peer",
                                  HCCL ``EI0006``, MindSpore node time-outs), the shim gave up waiting (3),
                                  or another host's failure ended this host's attempt (3)
``host_lost``           yes       another host of the job was lost (its shim vanished or stopped answering the
                                  job's coordinator), or did not come back in time (the shim's exit 75)
``hang``                yes       no rank of the job wrote output (nor touched its progress file) for
                                  ``MALAUNCH_HANG_TIMEOUT``: the shim ended the attempt (its line, exit 124)
``signal``              yes       killed by a signal the shim did not send (named: 137 SIGKILL, 134 SIGABRT...)
``launcher_misuse``     no        the shim or a launcher rejected its input (2), a command not found (126/127)
``user_error``          no        the user's script exited non-zero on its own (1, 2, ...)
``stopped``             no        the shim itself was stopped (SIGTERM/SIGINT/SIGHUP from outside)
``prepare_failed``      no        a prepare step (``MALAUNCH_PREPARE``) failed, was killed or timed out before
                                  any attempt: the job's own setup, which a restart would only repeat
=====================  =========  ==========================================================================

Log patterns win over the exit code: the NCCL watchdog ends a rank with SIGABRT (134), a rendezvous failure
usually with 1. Each pattern is the stable part of a real message; ``docs/recovery.md`` lists examples.
"""


import re
from typing import Any, Dict, NamedTuple, Optional, Pattern, Sequence, Tuple

from ..contract.signals import signal_hint, signal_in_any_code, signal_name

__all__ = [
    "CLASSES",
    "COLLECTIVE_TIMEOUT",
    "EXIT_HANG",
    "HANG",
    "HOST_LOST",
    "LAUNCHER_MISUSE",
    "PREPARE_FAILED",
    "RENDEZVOUS_TIMEOUT",
    "RETRYABLE",
    "SIGNAL",
    "STOPPED",
    "USER_ERROR",
    "Classification",
    "classify_exit",
    "classify_failure",
    "peer_failure",
]

COLLECTIVE_TIMEOUT = "collective_timeout"
RENDEZVOUS_TIMEOUT = "rendezvous_timeout"
HOST_LOST = "host_lost"
HANG = "hang"
#: The shim's exit code for an attempt it ended as hung (as GNU ``timeout`` exits when its command timed out).
EXIT_HANG = 124
SIGNAL = "signal"
LAUNCHER_MISUSE = "launcher_misuse"
USER_ERROR = "user_error"
STOPPED = "stopped"
PREPARE_FAILED = "prepare_failed"

#: Every class, most specific first.
CLASSES = (COLLECTIVE_TIMEOUT, RENDEZVOUS_TIMEOUT, HOST_LOST, HANG, SIGNAL, LAUNCHER_MISUSE, USER_ERROR, STOPPED,
           PREPARE_FAILED)
#: The classes a restart can help with (``launcher.restart_on: retryable``, the default).
RETRYABLE = frozenset((COLLECTIVE_TIMEOUT, RENDEZVOUS_TIMEOUT, HOST_LOST, HANG, SIGNAL))

_DESCRIPTIONS = {
    COLLECTIVE_TIMEOUT: "a collective operation timed out (a peer rank died, hung or is too slow)",
    RENDEZVOUS_TIMEOUT: "rendezvous or network failure (a peer or the master could not be reached in time)",
    HOST_LOST: "a host of the job was lost (its shim vanished or stopped answering): the job restarts with it or "
    "exits 75 for the platform's restart",
    HANG: "the job hung: no rank wrote output (nor touched its progress file) for the hang timeout, so the shim "
    "ended the attempt",
    SIGNAL: "killed by a signal the shim did not send",
    LAUNCHER_MISUSE: "the launcher or the shim rejected its input: fix the job, a restart cannot help",
    USER_ERROR: "the script exited with an error of its own: fix the script, a restart cannot help",
    STOPPED: "the job was stopped from outside",
    PREPARE_FAILED: "a prepare step failed, was killed or timed out before any attempt: fix the step (its "
    "output is in the report and prepare.log); the shim does not run it again",
}

_COLLECTIVE = (
    r"Watchdog caught collective operation timeout",  # NCCL (ProcessGroupNCCL watchdog)
    r"Timed out waiting \d+ ?ms for (?:recv|send) operation to complete",  # gloo tcp transport
    r"\bEI0002\b",  # HCCL: "The wait execution of the Notify register times out."
    r"Notify register times out",
    r"HCCL[^\n]*(?:timeout|timed out|time out)",
    r"(?:Reduce|Broadcast) wait (?:receiving|sending)",  # MindSpore CPU collectives when a peer is gone
)
_RENDEZVOUS = (
    r"DistStoreError",  # torch: "Timed out after N seconds waiting for clients. 1/2 clients joined."
    r"DistNetworkError",  # torch: "The client socket has timed out after ...ms while trying to connect"
    r"Rendezvous(?:Timeout|Connection|Closed)Error",  # torchelastic rendezvous
    r"The client socket has timed out",
    r"waiting for clients\. \d+/\d+ clients joined",
    r"Connection (?:closed|reset) by peer",  # gloo pair.cc when a peer rank dies mid-collective
    r"\bEI0006\b",  # HCCL: getting a socket timed out
    r"The node: \S+ is timed out",  # MindSpore scheduler heartbeat
    r"Timed out node list is",  # MindSpore: "The total number of timed out node is N. Timed out node ..."
    r"gave up waiting for",  # the shim's own bounded waits (rank table, master name)
    r"this host's attempt ends with it",  # the coordinator ended this host's attempt: another host failed
)
_HOST_LOST = (r"^ma-entrypoint: host \d+ \([^)]*\) lost: ",)  # the shim's line (run/hosts)
_HANG = (r"^ma-entrypoint: hung: ",)  # the shim's line (run/hang)
_PREPARE = (r"^ma-entrypoint: prepare step \d+ of \d+ on host ",)  # the shim's line (run/prepare_steps)
_MISUSE = (
    r"^ma-entrypoint: error:",
    r"^(?:torchrun|msrun|run\.py): error:",  # argparse of the launchers
)


# A rank whose log says one of these failed *because of a peer* (the peer died, hung or closed the connection):
# the root-cause ordering (:mod:`.rootcause`) never lets such a death outrank one it cannot be ordered with.
_PEER = (
    r"Connection closed by peer",  # gloo pair.cc: "... This is typically caused by a remote worker crashing"
    r"Connection reset by peer",  # gloo, c10d TCPStore
    r"typically caused by a remote worker crashing",
    r"Timed out waiting \d+ ?ms for (?:recv|send) operation to complete",  # gloo, a peer gone silent
    r"DistNetworkError",  # c10d: the store's socket broke (its host rank died)
    r"DistStoreError",  # c10d: peers never came
    r"Watchdog caught collective operation timeout",  # NCCL
    r"(?:NCCL|HCCL)? ?communicator was aborted",  # NCCL/HCCL ProcessGroup abort
    r"ncclRemoteError|remote process exited or there was a network error",  # NCCL
    r"\bEI000[26]\b",  # HCCL: notify wait timed out / socket timed out
    r"Notify register times out",  # HCCL
    r"HCCL[^\n]*(?:timeout|timed out|time out)",
    r"(?:Reduce|Broadcast|AllGather|AllReduce) wait (?:receiving|sending)",  # MindSpore CPU collectives
    r"The node: \S+ is timed out",  # MindSpore scheduler heartbeat
    r"Timed out node list is",  # MindSpore
    r"terminate called without an active exception",  # torch tearing down a process group whose peer is gone
)


#: Each group of patterns above, compiled the first time a failure is classified (not at import: the verbs and
#: the shim's start-up that never classify one do not pay for it).
_COMPILED: Dict[Tuple[str, ...], Tuple[Pattern[str], ...]] = {}


def _compiled(texts: Tuple[str, ...]) -> Tuple[Pattern[str], ...]:
    patterns = _COMPILED.get(texts)
    if patterns is None:
        patterns = _COMPILED[texts] = tuple(re.compile(text) for text in texts)
    return patterns


def peer_failure(tail: Sequence[str]) -> Optional[str]:
    """The peer or collective failure ``tail`` (log lines, an error file's message) names: the matched words,
    newest line first; None when it names none (a native crash, ``terminate called after throwing ...``)."""
    patterns = _compiled(_PEER)
    for line in reversed(tail):
        for pattern in patterns:
            found = pattern.search(line)
            if found is not None:
                return found.group(0).strip()
    return None


class Classification(NamedTuple):
    """The class of one failure: ``kind`` (one of :data:`CLASSES`), whether a restart can help, and why."""

    kind: str
    retryable: bool
    reason: str  # the log line that decided it, or the rule that did (shortened)
    signal: Optional[int] = None  # the signal that was seen (class ``signal``), when known

    @property
    def description(self) -> str:
        """What the class means, in one sentence; for ``signal``, the signal that was seen and what it hints at."""
        if self.kind != SIGNAL or self.signal is None:
            return _DESCRIPTIONS[self.kind]
        hint = signal_hint(self.signal)
        seen = f"killed by {signal_name(self.signal)} ({128 + self.signal}), a signal the shim did not send"
        return f"{seen}: {hint}" if hint else seen

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready form, as the shim's report and ``ma-submit status --output json`` show it."""
        return {
            "class": self.kind,
            "retryable": self.retryable,
            "reason": self.reason,
            "description": self.description,
        }


def _make(kind: str, reason: str, signal: Optional[int] = None) -> Classification:
    shortened = reason if len(reason) <= 200 else reason[:197] + "..."
    return Classification(kind, kind in RETRYABLE, shortened, signal)


def _search(texts: Tuple[str, ...], tail: Sequence[str]) -> Optional[str]:
    patterns = _compiled(texts)
    for line in reversed(tail):  # the newest evidence first
        for pattern in patterns:
            if pattern.search(line):
                return line.strip()
    return None


def classify_failure(
    exit_code: int,
    tail: Sequence[str] = (),
    *,
    signal: Optional[int] = None,
    origin: str = "rank",
    stopped: bool = False,
) -> Classification:
    """Classify one failure. Pure.

    Args:
        exit_code: the failing process's code: shell style (137) or a ``Popen`` return code (-9).
        tail: the last lines of its log (more lines, better evidence; order oldest first).
        signal: the signal that killed it, when known.
        origin: ``"rank"`` (a training process), ``"launcher"`` (torchrun/msrun itself) or ``"shim"`` (the
            shim's own exit code, e.g. as a backend sees it with no report).
        stopped: the shim itself was stopped by a signal from outside.
    """
    if stopped:
        return _make(STOPPED, "the shim received a stop signal")
    lines = list(tail)
    found = _search(_PREPARE, lines[-1:])  # the step's own output before it may say anything
    if found is not None:
        return _make(PREPARE_FAILED, found)
    found = _search(_HOST_LOST, lines)
    if found is not None:
        return _make(HOST_LOST, found)
    found = _search(_HANG, lines)
    if found is not None:
        return _make(HANG, found)
    found = _search(_COLLECTIVE, lines)
    if found is not None:
        return _make(COLLECTIVE_TIMEOUT, found)
    found = _search(_RENDEZVOUS, lines)
    if found is not None:
        return _make(RENDEZVOUS_TIMEOUT, found)
    if origin == "shim" and exit_code == 75:  # run/hosts/roster.py's EXIT_HOST_LOST
        return _make(HOST_LOST, "the shim exited with 75: a host was lost and did not come back")
    if origin == "shim" and exit_code == EXIT_HANG:
        return _make(HANG, f"the shim exited with {EXIT_HANG}: the job hung")
    sig = signal_in_any_code(exit_code, signal)
    if sig is not None:
        if origin == "shim" and sig in (1, 2, 15):  # the shim's own 129/130/143: it was stopped
            return _make(STOPPED, f"the shim exited with {exit_code} after signal {sig}")
        return _make(SIGNAL, f"killed by signal {sig} (exit code {128 + sig})", sig)
    found = _search(_MISUSE, lines) if origin != "rank" else None  # a rank's own argparse error is the user's
    if found is not None:
        return _make(LAUNCHER_MISUSE, found)
    if exit_code in (126, 127):
        return _make(LAUNCHER_MISUSE, f"exit code {exit_code}: the command cannot be found or executed")
    if origin in ("shim", "launcher") and exit_code in (2, 3):
        return _make(LAUNCHER_MISUSE, f"the {origin} exited with {exit_code}: its input was rejected")
    return _make(USER_ERROR, f"exit code {exit_code}")


def classify_exit(exit_code: int, log_tail: Sequence[str] = (), *, origin: str = "shim") -> Classification:
    """Classify a failed job from what a backend sees: the job's (shim's) exit code and its log's last lines."""
    return classify_failure(exit_code, log_tail, origin=origin)
