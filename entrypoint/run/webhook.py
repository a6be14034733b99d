"""The webhook program: POST one event's JSON to one URL and say how it went (started by :mod:`.notifier`).

``python -I -S -c BOOT PACKAGE_DIR HEADERS TIMEOUT [SECRET_ENV]`` (HEADERS a JSON object; on stdin the URL's line,
then the body: a URL's path may be its token, and a command line is any user's to read; SECRET_ENV the variable of
this program's environment whose value signs the body, :mod:`.signature`) prints one line: ``ok``, ``retry WHY`` (a
connection error, an HTTP 5xx or 429: worth another try) or ``fail WHY`` (any other HTTP error, and a redirect,
which is not followed: :func:`.notify.redirect_reason`). A process of its own, so that the shim does not load
``urllib.request`` and the HTTP, e-mail and TLS modules under it.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any, Optional, Sequence, Tuple

from .notify import redirect_reason
from .signature import SIGNATURE_HEADER, sign

__all__ = ["main", "post"]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follow no redirect: the answer is the 3xx itself (an HTTPError)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> Optional[urllib.request.Request]:
        return None


def post(url: str, headers: dict[str, str], body: bytes, timeout: float) -> Tuple[bool, str]:
    """One POST: ``(retry?, why it failed)``; ``why`` empty when the target took it."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.build_opener(_NoRedirect).open(request, timeout=timeout) as answer:  # http(s): parse
            answer.read(1024)
            return False, ""
    except urllib.error.HTTPError as error:
        if 300 <= error.code < 400:
            return False, redirect_reason(error.code, url, error.headers.get("Location"))
        return error.code >= 500 or error.code == 429, f"HTTP {error.code}"
    except (http.client.InvalidURL, ValueError) as error:  # its message holds the URL: the name alone
        return False, f"its URL cannot be sent: {type(error).__name__}; check the url in the job file"
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        return True, f"{type(reason).__name__}: {reason}" if not isinstance(reason, str) else reason


def main(argv: Sequence[str]) -> int:
    """Run the program (see the module docstring); 0 once it said its line."""
    headers, timeout = json.loads(argv[0]), float(argv[1])
    url = sys.stdin.buffer.readline().decode("utf-8").rstrip("\n")
    body = sys.stdin.buffer.read()
    if len(argv) > 2:  # the shim checked that the variable is set
        headers[SIGNATURE_HEADER] = sign(os.environ.get(argv[2], "").encode("utf-8"), body)
    again, why = post(url, headers, body, timeout)
    verdict = "ok" if not why else f"{'retry' if again else 'fail'} {why}"
    sys.stdout.write(verdict.replace("\n", " ") + "\n")
    return 0
