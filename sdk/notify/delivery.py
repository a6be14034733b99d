"""Sending one event to one target from the SDK (``ma-submit notify test``, the local queue's own events).

A webhook is POSTed with requests under a tenacity policy (back-off from 0.5 s, doubling; retried on a
connection error, an HTTP 5xx or 429; a redirect is not followed, as the shim's sender follows none:
``redirect_reason``); a command is run with the event on stdin and in ``MALAUNCH_EVENT`` /
``MALAUNCH_EVENT_JSON``, retried on a non-zero exit. Everything within ``timeout`` seconds; the result says what
happened in one line, never the secret or a URL's path.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any, Mapping, NamedTuple

import requests
import tenacity
from malaunch.entrypoint.public import SIGNATURE_HEADER, redirect_reason, sign

from .targets import NotifyTarget

__all__ = ["Delivery", "deliver"]

_FIRST_PAUSE = 0.5


class Delivery(NamedTuple):
    """How sending to one target went: ``ok``, the tries made and one line (``HTTP 200``, the reason)."""

    target: str
    ok: bool
    tries: int
    detail: str


class _Again(Exception):
    """A try that may be made again (its reason is the message)."""


class _Refused(Exception):
    """A try that is not worth making again (4xx, a secret not set, a program not found)."""


def _post(target: NotifyTarget, event: str, body: bytes, environ: Mapping[str, str], left: float) -> str:
    headers = {"Content-Type": "application/json", "User-Agent": "malaunch", "X-Malaunch-Event": event}
    if target.secret_env is not None:
        secret = environ.get(target.secret_env)
        if not secret:
            raise _Refused(f"its secret variable {target.secret_env} is not set")
        headers[SIGNATURE_HEADER] = sign(secret.encode("utf-8"), body)
    assert target.url is not None
    try:
        answer = requests.post(target.url, data=body, headers=headers, timeout=max(0.05, left), allow_redirects=False)
    except requests.RequestException as error:
        raise _Again(f"{type(error).__name__}") from None
    if answer.status_code >= 500 or answer.status_code == 429:
        raise _Again(f"HTTP {answer.status_code}")
    if 300 <= answer.status_code < 400:
        raise _Refused(redirect_reason(answer.status_code, target.url, answer.headers.get("Location")))
    if answer.status_code >= 300:
        raise _Refused(f"HTTP {answer.status_code}")
    return f"HTTP {answer.status_code}"


def _run(target: NotifyTarget, event: str, body: bytes, environ: Mapping[str, str], left: float) -> str:
    env = {**environ, "MALAUNCH_EVENT": event, "MALAUNCH_EVENT_JSON": body.decode("utf-8")}
    try:
        done = subprocess.run(list(target.command), input=body, env=env, timeout=max(0.05, left), check=False,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise _Refused("the command did not end in time") from None
    except OSError as error:
        raise _Refused(f"cannot run it: {error.strerror or error}") from None
    if done.returncode != 0:
        last = (done.stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        raise _Again(f"exit {done.returncode}" + (f": {last[0][:160]}" if last[0] else ""))
    return "exit 0"


def deliver(target: NotifyTarget, data: Mapping[str, Any], environ: Mapping[str, str], timeout: float) -> Delivery:
    """Send ``data`` (an event payload) to ``target`` within ``timeout`` seconds; never raises for the target's
    failures (the :class:`Delivery` says them)."""
    body = json.dumps(data, sort_keys=True).encode("utf-8")
    event = str(data.get("event", "test"))
    deadline = time.monotonic() + timeout
    tries = 0

    def once() -> str:
        nonlocal tries
        tries += 1
        left = deadline - time.monotonic()
        send = _post if target.url is not None else _run
        return send(target, event, body, environ, left)

    retrying = tenacity.Retrying(
        stop=lambda state: time.monotonic() + _FIRST_PAUSE * 2 ** (state.attempt_number - 1) >= deadline,
        wait=tenacity.wait_exponential(multiplier=_FIRST_PAUSE, min=_FIRST_PAUSE, max=30),
        retry=tenacity.retry_if_exception_type(_Again),
        reraise=True,
    )
    try:
        said = retrying(once)  # before the Delivery is made: its tries are counted while it runs
        return Delivery(target.label, True, tries, said)
    except (_Again, _Refused) as error:
        return Delivery(target.label, False, tries, str(error))
