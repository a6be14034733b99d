"""The one retry policy for every backend's HTTP calls: 429, 5xx and connection errors are retried.

:func:`call_with_retry` runs ``send(attempt)`` (attempt counts from 1) under a tenacity policy:

- retried: an answer with status 429 or 5xx, and ``requests`` connection errors and timeouts; a client that
  does not speak ``requests`` (the ``kubernetes`` client of the Volcano backend) raises :class:`Transient`
  for the same cases (its 429/5xx with the ``Retry-After`` it got, its connection errors and timeouts);
- the wait is exponential with jitter (``RetryPolicy.initial`` doubling up to ``maximum``), except that a
  ``Retry-After`` header (seconds or an HTTP date) is honoured, up to ``max_retry_after``;
- when the attempts run out, :class:`~malaunch.sdk.errors.BackendError` says what was asked, how many
  attempts over how long, and the last problem.

Any other answer (2xx, 4xx) is returned for the caller to judge. ``sleep`` and ``clock`` are parameters so
tests can run the policy without waiting.
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass
from typing import Callable, Optional, TypeVar, Union

import requests
import tenacity

from ..errors import BackendError

__all__ = ["DEFAULT_POLICY", "RetryPolicy", "RetryableStatus", "Transient", "call_with_retry", "retry_after_seconds"]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: ``attempts`` in all, waits from ``initial`` doubling to ``maximum`` (+ up to ``jitter``)."""

    attempts: int = 6
    initial: float = 0.5
    maximum: float = 20.0
    jitter: float = 0.5
    max_retry_after: float = 120.0


#: The policy every HTTP call uses unless told otherwise.
DEFAULT_POLICY = RetryPolicy()


class Transient(Exception):
    """A failure worth retrying, from a client that does not return ``requests`` responses.

    ``problem`` says what happened (shown when the attempts run out); ``retry_after`` is the answer's
    ``Retry-After`` header, if any.
    """

    def __init__(self, problem: str, retry_after: Optional[str] = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.retry_after = retry_after


class RetryableStatus(Exception):
    """An answer worth retrying (429 or 5xx); carries the response."""

    def __init__(self, response: requests.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


_RETRIED = (RetryableStatus, Transient, requests.ConnectionError, requests.Timeout)


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


def _problem(error: BaseException) -> str:
    if isinstance(error, Transient):
        return error.problem[:300]
    if isinstance(error, RetryableStatus):
        body = error.response.text.strip().replace("\n", " ")
        return f"HTTP {error.response.status_code}" + (f" {body[:200]}" if body else "")
    return f"{type(error).__name__}: {str(error)[:200]}"


def call_with_retry(
    send: Callable[[int], Union[requests.Response, T]],
    *,
    what: str,
    policy: RetryPolicy = DEFAULT_POLICY,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], float] = time.time,
) -> Union[requests.Response, T]:
    """``send(attempt)`` until it gives an answer that is not 429/5xx (see the module docstring).

    ``send`` may return something other than a response (e.g. a job it found before sending again); that
    is returned as is.

    Raises:
        BackendError: every attempt failed; the message names ``what``, the attempts and the time spent.
    """

    def wait(state: tenacity.RetryCallState) -> float:
        outcome = state.outcome
        error = outcome.exception() if outcome is not None else None
        header = None
        if isinstance(error, RetryableStatus):
            header = error.response.headers.get("Retry-After")
        elif isinstance(error, Transient):
            header = error.retry_after
        asked = retry_after_seconds(header, wall_clock())
        if asked is not None:
            return min(asked, policy.max_retry_after)
        step: float = policy.initial * 2.0 ** (state.attempt_number - 1)
        return min(policy.maximum, step) + random.uniform(0, policy.jitter)

    attempt = 0

    def once() -> Union[requests.Response, T]:
        nonlocal attempt
        attempt += 1
        response = send(attempt)
        if isinstance(response, requests.Response) and (response.status_code == 429 or response.status_code >= 500):
            raise RetryableStatus(response)
        return response

    start = clock()
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(policy.attempts),
        wait=wait,
        retry=tenacity.retry_if_exception_type(_RETRIED),
        sleep=sleep,
        reraise=False,
    )
    try:
        return retrying(once)
    except tenacity.RetryError as exc:
        last = exc.last_attempt.exception()
        problem = _problem(last) if last is not None else "no answer"
        raise BackendError(
            f"{what} failed after {attempt} attempts over {clock() - start:.1f}s, last: {problem}; "
            "check the endpoint and your network, then try again"
        ) from None
