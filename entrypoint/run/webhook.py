"""The webhook program: POST one event's JSON to one URL and say how it went (started by :mod:`.notifier`).

``python -I -S -c BOOT PACKAGE_DIR URL HEADERS TIMEOUT [SECRET_ENV]`` (HEADERS a JSON object; the body on stdin;
SECRET_ENV the variable of this program's environment whose value signs the body, :mod:`.signature`) prints one line:
``ok``, ``retry WHY`` (a connection error, an HTTP 5xx or 429: worth another try) or ``fail WHY`` (any other HTTP
error). A process of its own, so that the shim does not load ``urllib.request`` and the HTTP, e-mail and TLS
modules under it.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from typing import Sequence, Tuple

from .signature import SIGNATURE_HEADER, sign

__all__ = ["main", "post"]


def post(url: str, headers: dict[str, str], body: bytes, timeout: float) -> Tuple[bool, str]:
    """One POST: ``(retry?, why it failed)``; ``why`` empty when the target took it."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # http(s) only: checked at parse
            answer.read(1024)
            return False, ""
    except urllib.error.HTTPError as error:
        return error.code >= 500 or error.code == 429, f"HTTP {error.code}"
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        return True, f"{type(reason).__name__}: {reason}" if not isinstance(reason, str) else reason


def main(argv: Sequence[str]) -> int:
    """Run the program (see the module docstring); 0 once it said its line."""
    url, headers, timeout = argv[0], json.loads(argv[1]), float(argv[2])
    body = sys.stdin.buffer.read()
    if len(argv) > 3:  # the shim checked that the variable is set
        headers[SIGNATURE_HEADER] = sign(os.environ.get(argv[3], "").encode("utf-8"), body)
    again, why = post(url, headers, body, timeout)
    verdict = "ok" if not why else f"{'retry' if again else 'fail'} {why}"
    sys.stdout.write(verdict.replace("\n", " ") + "\n")
    return 0
