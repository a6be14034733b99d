"""What a job's events say to the targets of ``MALAUNCH_NOTIFY``: the events, the payload, its signature, the setting.

Pure and cheap to import (the SDK's seam re-exports it): the sending is :mod:`.notifier`'s, the HTTP POST a program
of its own (:mod:`.webhook`).

Host 0's shim (the one of a one-host job too) is the one that sends: it sees every attempt's end and the job's end
first-hand, so nothing is sent twice. ``MALAUNCH_NOTIFY`` is JSON written by the SDK (``docs/entrypoint.md``)::
    {"job": {"id": "...", "name": "...", "backend": "local"}, "timeout": 10,
     "targets": [{"url": "https://...", "secret_env": "<NAME>", "events": ["failed", "succeeded"]},
                 {"command": ["notify-send", "job"], "events": ["failed"]}]}

Contract:

1. Events: ``succeeded``, ``failed``, ``stopped`` (the job's end), ``restarted`` (an attempt failed and the group
   starts again), ``hung`` (an attempt ended as hung), ``host_lost`` and ``host_back`` (a host of a multi-host job
   lost, or joined again, as host 0's coordinator saw it: :func:`host_event`). A target gets only the events it
   lists.
2. The payload (:func:`payload`) is one JSON object: ``version``, ``event``, ``job`` (id, name, backend),
   ``attempt``, ``time`` (UTC, ISO 8601), ``text`` (one line: a Slack or Teams incoming webhook shows it as is),
   ``exit_code`` at the end, and ``cause`` (host, address, rank, name, exit_code, signal, class) when something failed.
3. A webhook gets it POSTed with ``X-Malaunch-Signature: sha256=<hex>``, the HMAC-SHA256 of the body with the
   value of the variable ``secret_env`` names (:func:`.signature.sign`, computed by the webhook program); the
   secret is never printed. A command gets it on stdin and in ``MALAUNCH_EVENT`` / ``MALAUNCH_EVENT_JSON`` (its
   argv is run as is, no shell).
4. Delivery never harms the job: each event is sent in a thread of its own (a target gets its events in order),
   retried with back-off (0.5 s,
   doubling) on a connection error, an HTTP 5xx or 429, or a command's non-zero exit, within ``timeout`` seconds
   in all; the job's end waits for its sends at most ``timeout`` seconds. A target that fails is said once, with
   its reason; the job's outcome and exit code never change.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from typing import Any, Dict, List, Mapping, Optional, Tuple

__all__ = [
    "DEFAULT_EVENTS",
    "DEFAULT_NOTIFY_EVENTS",
    "DEFAULT_NOTIFY_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "EVENTS",
    "NOTIFY_VAR",
    "NOTIFY_EVENTS",
    "notify_payload",
    "parse_notify",
    "payload",
    "redirect_reason",
    "target_label",
]

NOTIFY_VAR = "MALAUNCH_NOTIFY"
EVENTS = ("succeeded", "failed", "restarted", "hung", "host_lost", "host_back", "stopped")
DEFAULT_EVENTS = ("failed", "succeeded")
DEFAULT_TIMEOUT = 10.0
#: The names the SDK sees them by (through ``malaunch.entrypoint.public``).
NOTIFY_EVENTS, DEFAULT_NOTIFY_EVENTS, DEFAULT_NOTIFY_TIMEOUT = EVENTS, DEFAULT_EVENTS, DEFAULT_TIMEOUT
_VERSION = 1


def target_label(target: Mapping[str, Any]) -> str:
    """A target as it may be shown: a URL's scheme and host only (its path, query, fragment and any password may
    hold a token), a command's name. Never raises, whatever the URL."""
    url = target.get("url")
    if isinstance(url, str):
        try:
            parts = urllib.parse.urlsplit(url)
            host, port = parts.hostname, parts.port
        except ValueError:  # a broken address or port: said by the checks, shown as unknown here
            return "a webhook (its URL cannot be read)"
        return f"{parts.scheme}://{host or '?'}{f':{port}' if port else ''}/..."
    command = target.get("command")
    return f"command {command[0]}" if isinstance(command, list) and command else "target"


def redirect_reason(code: int, url: str, location: Optional[str]) -> str:
    """Why a webhook that answered ``code`` (a 3xx) to ``url`` did not take the event: a redirect is not followed (an
    HTTP client asks the new address with a GET and no body for 301, 302 and 303, and a 200 there would count as
    delivered), so the line names where it points, by scheme and host only, and what to do."""
    where = f" to {target_label({'url': urllib.parse.urljoin(url, location)})}" if location else ""
    return f"HTTP {code}: it redirects{where}; give the address it redirects to as the url"


def _cause_text(cause: Mapping[str, Any]) -> str:
    rank, host, code, signum = cause.get("rank"), cause.get("host"), cause.get("exit_code"), cause.get("signal")
    name = cause.get("name")
    named = f"process {name}" if isinstance(name, str) and name else "the shim"
    who = f"rank {rank}" if isinstance(rank, int) else named
    where = f" on host {host}" if isinstance(host, int) else ""
    if isinstance(code, int):
        what = f"exited with {code}"
    elif isinstance(signum, int):
        what = f"was ended by signal {signum}"
    else:
        what = "failed"
    kind = cause.get("class")
    return f"{who}{where} {what}" + (f" ({kind})" if kind else "")


def payload(event: str, job: Mapping[str, Any], attempt: int, *, cause: Optional[Mapping[str, Any]] = None,
            exit_code: Optional[int] = None, now: Optional[float] = None,
            detail: Optional[str] = None) -> Dict[str, Any]:  # fmt: skip
    """The JSON object sent for ``event`` (see the module's docstring); pure given ``now``. ``detail`` says what
    happened in the text in place of the cause (a host lost or back)."""
    when = time.time() if now is None else now
    name = job.get("name") or job.get("id")
    said = {"succeeded": "succeeded", "failed": "failed", "stopped": "was stopped", "hung": "hung",
            "restarted": "failed and restarts", "host_lost": "lost a host", "host_back": "has a host back"}  # fmt: skip
    text = f"malaunch job {name} ({job.get('backend')}) {said.get(event, event)}, attempt {attempt}"
    if detail:
        text += f": {detail}"
    elif cause:
        text += f": {_cause_text(cause)}"
    if exit_code is not None and event in ("failed", "stopped"):
        text += f"; exit code {exit_code}"
    text += f" [{job.get('id')}]"
    data: Dict[str, Any] = {"version": _VERSION, "event": event, "job": dict(job), "attempt": attempt,
                            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when)), "text": text}  # fmt: skip
    if exit_code is not None:
        data["exit_code"] = exit_code
    if cause:
        data["cause"] = {key: value for key, value in cause.items() if value is not None}
    return data


notify_payload = payload


def parse_notify(text: str) -> Tuple[Dict[str, Any], float, List[Dict[str, Any]]]:
    """``MALAUNCH_NOTIFY``'s job, timeout and targets. Raises ValueError naming what is wrong."""

    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("targets"), list):
        raise ValueError("must be a JSON object with a targets list")
    job: Dict[str, Any] = data["job"] if isinstance(data.get("job"), dict) else {}
    timeout = data.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
        raise ValueError(f"timeout must be seconds from 0 to 3600, got {timeout!r}")
    targets: List[Dict[str, Any]] = []
    for index, target in enumerate(data["targets"]):
        url, command = (target.get("url"), target.get("command")) if isinstance(target, dict) else (None, None)
        if isinstance(url, str) == (isinstance(command, list) and bool(command)):
            raise ValueError(f"targets[{index}] must have a url or a command (an argv list), not both")
        if isinstance(url, str) and urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"targets[{index}].url must be http(s)")
        if isinstance(url, str) and any(ord(char) <= 32 or ord(char) == 127 for char in url):
            raise ValueError(f"targets[{index}].url must hold no space or control character")
        events = target.get("events", list(DEFAULT_EVENTS))
        if not isinstance(events, list) or any(event not in EVENTS for event in events):
            raise ValueError(f"targets[{index}].events must be a list of {', '.join(EVENTS)}")
        targets.append(dict(target, events=events))
    return job, float(timeout), targets
