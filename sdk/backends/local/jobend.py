"""A local job's failure, decided from how each host's shim ended: the host, the job's code and its line. Pure.

The runner records each host's end as a :class:`HostEnd` and decides the job's failure from all of them
(:func:`job_failure`), never from the order it reaped them in. The facts, strongest first:

1. A shim the runner itself ended while the job was ending (its SIGTERM, the SIGKILL of a straggler) is last:
   its death is the teardown's, not its own.
2. A death that says a peer failed never outranks one that does not: a shim whose report names the job's root
   cause on another host (its coordinator chose it: a host lost, another host's rank) comes after a shim killed
   from outside (the pod died), a host whose own rank failed, a shim that could not start.
3. Then the host the coordinator's cause is on (the shims' reports agree on it): a host whose shim was killed,
   with no report of its own, is named by its own end (killed by SIGKILL, exit 137), not by the survivors'
   ``host 1 lost`` (75), which only says it left; a frozen host the runner killed as the job ended is named by
   the survivors' cause (rule 1).
4. Then the first recorded: ends of the same standing that no fact orders (hosts without a coordinator).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence, Tuple

from ...failures import failure_from_report
from .state import HostReport

__all__ = ["HostEnd", "host_failure", "job_failure"]


class HostEnd(NamedTuple):
    """How one host's shim ended, as the runner recorded it."""

    host: int  # its index
    address: str
    code: int  # its report's exit code, else its wait status's
    detail: str  # its report's account, else what its wait status says (``its shim (pid N) was killed by ...``)
    report: Optional[HostReport]  # its shim's own report (None: it wrote none)
    console: str  # its console log
    by_runner: bool = False  # the runner ended it while the job was ending: its death is not its own
    said: str = ""  # the line, when the runner has its own for this end (a shim that could not start)


def job_failure(ends: Sequence[HostEnd]) -> Optional[Tuple[int, int, str]]:
    """The job's failure among the ends recorded so far (see the module's docstring): the host its root cause is
    on, the job's code and its line; None when no host failed."""
    failed = [end for end in ends if end.code != 0]
    if not failed:
        return None
    named = next((end.report.cause_host for end in failed if end.report is not None
                  and end.report.cause_host is not None), None)  # fmt: skip
    chosen = min(failed, key=lambda end: (end.by_runner, _says_peer(end), end.host != named))  # then the first
    if chosen.said:
        return chosen.host, chosen.code, chosen.said
    return host_failure(chosen.host, chosen.address, chosen.code, chosen.detail, chosen.report, chosen.console)


def _says_peer(end: HostEnd) -> bool:
    """``end``'s report names the job's root cause on another host."""
    cause_host = end.report.cause_host if end.report is not None else None
    return cause_host is not None and cause_host != end.host


def host_failure(index: int, address: str, code: int, detail: str, report: Optional[HostReport],
                 console: str) -> Tuple[int, int, str]:  # fmt: skip
    """The job's failure when host ``index`` (``address``) ended with ``code``: the host its root cause is on, the
    job's code, and the line that says it. When the shims' coordinator chose the job's root cause (``detail``
    names it, with its host), that line is the job's whichever host's shim is reaped first: one form, from the
    facts, not from the reap order."""
    if report is not None and report.cause_host is not None and detail:
        return report.cause_host, code, detail
    said = f" ({detail})" if detail else ""
    if report is not None:
        return index, code, f"host {index} ({address}) exited with code {code}{said}"
    kind = failure_from_report(None, code, console)["class"]
    return index, code, f"host {index} ({address}) exited with code {code}{said}; class {kind}; console: {console}"
