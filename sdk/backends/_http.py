"""The one retry policy for every backend's HTTP calls: 429, 5xx and connection errors are retried.

:func:`call_with_retry` runs ``send(attempt)`` (attempt counts from 1) under a tenacity policy:

- retried: an answer with status 429 or 5xx, ``requests`` connection errors and timeouts, and an answer cut
  short (the connection broke before the body's end); a client that does not speak ``requests`` (the
  ``kubernetes`` client of the Volcano backend) raises :class:`Transient` for the same cases (its 429/5xx with
  the ``Retry-After`` it got and the status, its connection errors and timeouts);
- the wait is exponential with jitter (``RetryPolicy.initial`` doubling up to ``maximum``), except that a
  ``Retry-After`` header (seconds or an HTTP date) is honoured, up to ``max_retry_after``;
- an endpoint that cannot be reached (refused, unresolvable, no answer to connect within
  ``RetryPolicy.connect_timeout``) is retried only while the whole call stays within
  ``RetryPolicy.connect_budget`` seconds (about 10): a wrong or dead endpoint fails fast, a slow answer
  (read timeout, ``RetryPolicy.read_timeout``) is waited for;
- when the attempts run out, :class:`~malaunch.sdk.errors.BackendError` says in one whole sentence what was
  asked, why it failed in words and where (``the connection was refused`` at ``host:port``, never a cut-off
  exception repr), how many attempts over the time really spent (waits slept, not waits planned), and what
  to do: for an answer 429 or 5xx, the service's own error code and message and to wait (429) or try later
  (5xx), not to check the network;
- each retry can be announced before its wait (``notice``): the user sees the call is alive and why it waits;
  through one :class:`RetryNotes` a client keeps for all its calls, once an outage: every retry of the call that
  met it first is announced, the other retries during it are not (a ``wait`` or ``logs -f`` polling a flaky
  service said one note a retry at every poll), and one note says when it is over (every request retried in it
  answered at its first attempt again), with how many retries went unannounced.

Any other answer (2xx, 4xx) is returned for the caller to judge. ``sleep`` and ``clock`` are parameters so
tests can run the policy without waiting.
"""

from __future__ import annotations

import email.utils
import random
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Set, Tuple, TypeVar, Union

import requests
import tenacity
import urllib3

from ..errors import BackendError

__all__ = [
    "DEFAULT_POLICY",
    "RetryNotes",
    "RetryPolicy",
    "TLS_ERRORS",
    "RetryableStatus",
    "Transient",
    "address_of",
    "call_with_retry",
    "connection_reason",
    "retry_after_seconds",
    "service_error",
]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: ``attempts`` in all, waits from ``initial`` doubling to ``maximum`` (+ up to ``jitter``)."""

    attempts: int = 6
    initial: float = 0.5
    maximum: float = 20.0
    jitter: float = 0.5
    max_retry_after: float = 120.0
    connect_timeout: float = 3.0
    read_timeout: float = 60.0
    connect_budget: float = 10.0

    @property
    def timeout(self) -> Tuple[float, float]:
        """``(connect, read)`` timeouts for ``requests``."""
        return (self.connect_timeout, self.read_timeout)


#: The policy every HTTP call uses unless told otherwise.
DEFAULT_POLICY = RetryPolicy()


class Transient(Exception):
    """A failure worth retrying, from a client that does not return ``requests`` responses.

    ``problem`` says what happened (shown when the attempts run out); ``retry_after`` is the answer's
    ``Retry-After`` header, if any; ``unreachable``: the endpoint could not be reached at all (refused,
    unresolvable, no connection), so the connect budget applies as for ``requests``' connection errors;
    ``status``: the answer's HTTP status (429, 5xx) when there was one (it decides what the user is told to do).
    """

    def __init__(self, problem: str, retry_after: Optional[str] = None, unreachable: bool = False,
                 status: Optional[int] = None) -> None:  # fmt: skip
        super().__init__(problem)
        self.problem = problem
        self.retry_after = retry_after
        self.unreachable = unreachable
        self.status = status


class RetryableStatus(Exception):
    """An answer worth retrying (429 or 5xx); carries the response."""

    def __init__(self, response: requests.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


#: ``ChunkedEncodingError``: the body was cut short (the connection broke before the end ``Content-Length`` named).
_RETRIED = (RetryableStatus, Transient, requests.ConnectionError, requests.Timeout,
            requests.exceptions.ChunkedEncodingError)  # fmt: skip


def retry_after_seconds(value: Optional[str], now: float) -> Optional[float]:
    """Seconds to wait from a ``Retry-After`` header value (delta seconds or an HTTP date), or None."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - now)


_REASONS = (
    ("incompleteread", "the answer was cut short (the connection broke before its end)"),
    ("connection broken", "the answer was cut short (the connection broke before its end)"),
    ("wrong version number", "the TLS handshake failed: the server does not speak TLS there (is it http://?)"),
    ("connection refused", "the connection was refused (nothing listens there)"),
    ("name or service not known", "the host name does not resolve"),
    ("failed to resolve", "the host name does not resolve"),
    ("temporary failure in name resolution", "the host name does not resolve"),
    ("nodename nor servname", "the host name does not resolve"),
    ("network is unreachable", "the network is unreachable"),
    ("no route to host", "there is no route to the host"),
    ("connection reset", "the connection was reset"),
    ("remote end closed connection", "the server closed the connection without an answer"),
    ("connection aborted", "the server closed the connection without an answer"),
    ("certificate", "the TLS certificate was not accepted"),
)
#: The TLS errors of ``requests``, ``urllib3`` and ``ssl`` (``requests``' is a ``ConnectionError`` too).
TLS_ERRORS = (requests.exceptions.SSLError, urllib3.exceptions.SSLError, ssl.SSLError)


def connection_reason(error: BaseException, connect_timeout: Optional[float] = None) -> str:
    """Why a request could not be sent or answered, as a short whole phrase (never a cut-off message); also for
    the ``urllib3`` errors under other clients."""
    connect_timeout_error = isinstance(error, urllib3.exceptions.ConnectTimeoutError) and not isinstance(
        error, urllib3.exceptions.NewConnectionError  # a subclass of it, for a refused or unresolvable host too
    )
    if isinstance(error, requests.exceptions.ConnectTimeout) or connect_timeout_error:
        within = f" within {connect_timeout:g}s" if connect_timeout is not None else ""
        return f"no answer to connect{within} (the host is down or a firewall drops the traffic)"
    if isinstance(error, (requests.exceptions.ReadTimeout, urllib3.exceptions.ReadTimeoutError)):
        return "the server accepted the connection but did not answer in time"
    text = str(error).lower()
    for fragment, reason in _REASONS:
        if fragment in text:
            return reason
    if isinstance(error, TLS_ERRORS):
        return "the TLS handshake failed (check the endpoint's address and scheme, and its certificate)"
    return f"{type(error).__name__}"


def service_error(response: requests.Response) -> str:
    """The service's own words in an error answer: ``CODE: message`` of a ModelArts (API gateway) body, the
    ``message`` of a Kubernetes Status, else the body's text on one line; at most 300 characters."""
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and (data.get("error_code") or data.get("error_msg")):
        text = f"{data.get('error_code') or ''}: {data.get('error_msg') or ''}".strip(": ")
    elif isinstance(data, dict) and isinstance(data.get("message"), str):
        text = str(data["message"])
    else:
        text = response.text
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


def _problem(error: BaseException, policy: RetryPolicy) -> str:
    if isinstance(error, Transient):
        return error.problem[:400]
    if isinstance(error, RetryableStatus):
        said = service_error(error.response)
        return f"HTTP {error.response.status_code}" + (f" {said}" if said else "")
    return f"{connection_reason(error, policy.connect_timeout)} ({type(error).__name__})"


def _advice(error: Optional[BaseException]) -> str:
    """What to do once every attempt failed: by the last answer's status (429: wait; 5xx: later), else the network."""
    status = None
    if isinstance(error, RetryableStatus):
        status = error.response.status_code
    elif isinstance(error, Transient):
        status = error.status
    if status == 429:
        return "the service is limiting requests: wait a few minutes, then try again"
    if status is not None and status >= 500:
        return "the service is failing: try again later (if it lasts, check the service's status)"
    return "check the endpoint and your network, then try again"


def _unreachable(error: Optional[BaseException]) -> bool:
    if isinstance(error, Transient):
        return error.unreachable
    return isinstance(error, requests.ConnectionError) and not isinstance(error, requests.exceptions.ReadTimeout)


def _address(error: BaseException) -> str:
    """`` at host:port`` of the request that failed, when the error names it."""
    url = getattr(getattr(error, "request", None), "url", None)
    if not isinstance(url, str):
        return ""
    return address_of(url)


def address_of(url: str) -> str:
    """`` at host:port`` of ``url`` (the scheme's port when none is written); empty when it names no host."""
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return ""
    if not host:
        return ""
    return f" at [{host}]:{port}" if ":" in host else f" at {host}:{port}"


class RetryNotes:
    """One client's notes of its retries, as the module docstring says: an outage begins with the first retry of
    any request and lasts until every request that was retried in it (its ``what``) is answered at its first
    attempt again. ``tell`` (one line) is told every retry of the call that began it, nothing of the other retries
    in it, and once at its end that it is over (with how many retries went unnoted)."""

    def __init__(self, tell: Callable[[str], None]) -> None:
        self.tell = tell
        self._calls = 0
        self._failing: Set[str] = set()  # the requests retried in this outage and not answered at once since
        self._noted = 0  # the call whose retries are told (0: no outage)
        self._since = 0.0
        self._unnoted = 0

    def begin(self) -> int:
        """A new call's number (from 1)."""
        self._calls += 1
        return self._calls

    def retrying(self, call: int, what: str, line: str, now: float) -> None:
        """Call ``call`` of ``what`` retries (``line`` says why and when)."""
        if not self._failing:
            self._noted, self._since, self._unnoted = call, now, 0
        self._failing.add(what)
        if call == self._noted:
            self.tell(line)
        else:
            self._unnoted += 1

    def answered(self, what: str, first_attempt: bool, now: float) -> None:
        """A call of ``what`` got its answer (``first_attempt``: without a retry)."""
        if not first_attempt or what not in self._failing:
            return
        self._failing.discard(what)
        if self._failing:
            return
        more = f"; {self._unnoted} more retr{'y' if self._unnoted == 1 else 'ies'} not noted" if self._unnoted else ""
        self.tell(f"{what}: answered at the first attempt again, {now - self._since:.1f}s after the first retry{more}")
        self._noted = 0


def call_with_retry(
    send: Callable[[int], Union[requests.Response, T]],
    *,
    what: str,
    policy: RetryPolicy = DEFAULT_POLICY,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], float] = time.time,
    notice: Union[RetryNotes, Callable[[str], None], None] = None,
) -> Union[requests.Response, T]:
    """``send(attempt)`` until it gives an answer that is not 429/5xx (see the module docstring).

    ``send`` may return something other than a response (e.g. a job it found before sending again); that
    is returned as is. ``notice`` (if given) is told of each retry before its wait, in one line: what failed, in
    the service's words, and which attempt comes after how long (``...; attempt 2 of 6 in 1.3s``); a client's
    :class:`RetryNotes` (the same for all its calls) announces an outage once (see the module docstring), a plain
    callable every retry of this call.

    Raises:
        BackendError: every attempt failed; the message names ``what``, the attempts and the time spent.
    """

    notes = notice if isinstance(notice, RetryNotes) or notice is None else RetryNotes(notice)
    call = notes.begin() if notes is not None else 0
    slept = 0.0  # the waits really taken (a last wait planned but not taken is not time spent)
    planned: Dict[int, float] = {}

    def next_wait(state: tenacity.RetryCallState) -> float:
        if state.attempt_number not in planned:
            outcome = state.outcome
            error = outcome.exception() if outcome is not None else None
            step: float = min(policy.maximum, policy.initial * 2.0 ** (state.attempt_number - 1))
            step += random.uniform(0, policy.jitter)
            header = None
            if isinstance(error, RetryableStatus):
                header = error.response.headers.get("Retry-After")
            elif isinstance(error, Transient):
                header = error.retry_after
            asked = retry_after_seconds(header, wall_clock())
            if asked is not None:
                step = min(asked, policy.max_retry_after)
            planned[state.attempt_number] = step
        return planned[state.attempt_number]

    def nap(seconds: float) -> None:
        nonlocal slept
        sleep(seconds)
        slept += seconds

    def spent() -> float:
        return max(clock() - start, slept)  # a sleep that is not real (tests) still counts

    def stop(state: tenacity.RetryCallState) -> bool:
        if state.attempt_number >= policy.attempts:
            return True
        outcome = state.outcome
        error = outcome.exception() if outcome is not None else None
        if _unreachable(error):  # the next attempt may take a whole connect timeout again
            return spent() + next_wait(state) + policy.connect_timeout > policy.connect_budget
        return False

    attempt = 0

    def once() -> Union[requests.Response, T]:
        nonlocal attempt
        attempt += 1
        response = send(attempt)
        if isinstance(response, requests.Response) and (response.status_code == 429 or response.status_code >= 500):
            raise RetryableStatus(response)
        return response

    def announce(state: tenacity.RetryCallState) -> None:
        outcome = state.outcome
        error = outcome.exception() if outcome is not None else None
        if notes is None or error is None:
            return
        wait = state.next_action.sleep if state.next_action is not None else planned.get(state.attempt_number, 0.0)
        line = f"{what}: {_problem(error, policy)}; attempt {attempt + 1} of {policy.attempts} in {wait:.1f}s"
        notes.retrying(call, what, line, clock())

    start = clock()
    retrying = tenacity.Retrying(
        stop=stop,
        wait=next_wait,
        retry=tenacity.retry_if_exception_type(_RETRIED),
        sleep=nap,
        before_sleep=announce,
        reraise=False,
    )
    try:
        answer = retrying(once)
    except tenacity.RetryError as exc:
        last = exc.last_attempt.exception()
        tries = f"{attempt} attempt{'s' if attempt != 1 else ''} over {spent():.1f}s"
        if isinstance(last, Transient) and last.unreachable:
            raise BackendError(
                f"{what} failed: {last.problem} ({tries}); check the endpoint setting and your network, then try again"
            ) from None
        if _unreachable(last):
            assert last is not None
            reason = connection_reason(last, policy.connect_timeout)
            raise BackendError(
                f"{what} failed: cannot reach the endpoint{_address(last)}, {reason} "
                f"({tries}); check the endpoint setting and your network, then try again"
            ) from None
        problem = _problem(last, policy) if last is not None else "no answer"
        raise BackendError(f"{what} failed after {tries}, last: {problem}; {_advice(last)}") from None
    if notes is not None:
        notes.answered(what, attempt == 1, clock())
    return answer
