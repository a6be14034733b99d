"""One line for a multi-host job's root cause, as the job's coordinator chose it. Pure.

A cause is the JSON the coordinator sends and every host's report keeps (an attempt's ``job_cause``): ``host``,
``addr``, ``rank``, ``name``, ``code``, ``signal``, ``kind`` (its failure class), ``line``, ``log``, ``ended``
(the attempt ended on the coordinator's word: ``line`` says which host failed or was lost). The line names the
host, the rank (or the process), its own exit code or signal (a lost host: why it was lost, never the exit code
the survivors report for it), its class and its log; a fact that is not known is left out, never shown as
``None`` or as an empty field::

    rank 3 on host 1 (127.0.0.2) exited with 7; class user_error; log /logs/rank-3.log
    rank 1 on host 1 (127.0.0.2) killed by SIGKILL (exit 137); class signal; log /logs/rank-1.log
    host 1 (127.0.0.2) lost: no heartbeat for 3 s; class host_lost

A host's shim that refused to start its ranks (``name`` the shim's, no rank: its folder cannot hold the checkpoint
the job resumes from) is named by its own line, which says what and what to do::

    host 1 (127.0.0.2) cannot resume from checkpoint /ckpt/step-00000003 (step 3), ...: restore that folder ...
    (ma-entrypoint on host 1 (127.0.0.2) exited with 2); class launcher_misuse; log /logs/h1
"""

from __future__ import annotations

import signal as _signal
from typing import Any, Mapping, Optional

__all__ = ["describe_cause", "shim_line"]

_PROG = "ma-entrypoint"
_PREFIX = f"{_PROG}: "
_ERROR = "error: "  # the shim's own refusal: ``ma-entrypoint: error: <what>``
_ENDS = ": this host's attempt ends"  # how a host whose attempt the coordinator ended says why


def shim_line(line: object) -> str:
    """A shim's line without its ``ma-entrypoint:`` prefix ("" when it is not a string)."""
    text = line if isinstance(line, str) else ""
    return text[len(_PREFIX) :] if text.startswith(_PREFIX) else text


def _whole(value: object) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def _signal_name(number: int) -> str:
    try:
        return _signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _host(cause: Mapping[str, Any]) -> str:
    host, addr = _whole(cause.get("host")), _text(cause.get("addr"))
    if host is None:
        return f"host {addr}" if addr else ""
    return f"host {host} ({addr})" if addr else f"host {host}"


def _what(cause: Mapping[str, Any]) -> str:
    code, number = _whole(cause.get("code")), _whole(cause.get("signal"))
    if cause.get("kind") == "hang":
        return f"hung (ended with exit {code})" if code is not None else "hung"
    if number is not None:
        return f"killed by {_signal_name(number)}" + (f" (exit {code})" if code is not None else "")
    return f"exited with {code}" if code is not None else "failed"


def describe_cause(cause: Mapping[str, Any]) -> str:
    """The line for ``cause`` (see the module's docstring)."""
    where, kind, log = _host(cause), _text(cause.get("kind")), _text(cause.get("log"))
    line = shim_line(cause.get("line")).strip()
    rank, name = _whole(cause.get("rank")), _text(cause.get("name"))
    who = f"rank {rank}" if rank is not None else name
    if cause.get("ended"):  # the line names the host that failed or was lost, not this one
        head = line.partition(_ENDS)[0] or (f"{where} failed" if where else "a host failed")
        log = ""
    elif name == _PROG and rank is None and line:  # the shim itself refused: its line says what, and what to do
        text = line[len(_ERROR) :] if line.startswith(_ERROR) else line
        head = f"{text} ({_PROG}{f' on {where}' if where else ''} {_what(cause)})"
    elif kind == "host_lost" and where:
        why = line.partition(" lost: ")[2] if " lost: " in line else ""
        head = f"{where} lost" + (f": {why}" if why else "")
    elif who:
        head = f"{who}{f' on {where}' if where else ''} {_what(cause)}"
    elif where:
        head = f"{where}: its launcher {_what(cause)}"
    else:
        head = line or "a host failed"
    return head + (f"; class {kind}" if kind else "") + (f"; log {log}" if log else "")
