"""Who may use the page: the token printed at start (in the URL once, then a cookie, as Jupyter does), the Host
a request names, and the CSRF value every action's form carries.

- :meth:`Guard.check` takes a request's path, query, cookies and ``Host`` header and says whether it may be
  served, and when the token came in the query, that the answer is a cookie and a redirect to the same page
  without it (so the token does not stay in the address bar or the history).
- The CSRF value is derived from the token (an HMAC), put in every form that POSTs; an action whose value does
  not match, or whose ``Origin`` is another site, is refused.
- While the server listens on the loopback only, a ``Host`` header that is not the loopback's is refused (a
  web page on another name that resolves to 127.0.0.1, DNS rebinding, cannot read the page).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Mapping, NamedTuple, Optional

__all__ = ["LOOPBACK", "Guard", "Verdict"]

#: Addresses that are only this machine.
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class Verdict(NamedTuple):
    """Serve it (``ok``), or refuse with ``why``; ``set_cookie``: answer with the cookie and a redirect."""

    ok: bool
    why: str = ""
    set_cookie: bool = False


class Guard:
    """The token, the cookie's name and the CSRF value of one server."""

    def __init__(self, host: str, port: int, token: Optional[str] = None) -> None:
        self.token = token or secrets.token_urlsafe(32)
        self.port = port
        self.cookie = f"malaunch-ui-{port}"
        self.csrf = hmac.new(self.token.encode(), b"csrf", hashlib.sha256).hexdigest()
        self.loopback_only = host in LOOPBACK
        names = {"127.0.0.1", "localhost", "[::1]", host if ":" not in host else f"[{host}]"}
        self.hosts = frozenset(f"{name}:{port}" for name in names)

    def _same(self, given: Optional[str], wanted: str) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), wanted.encode())

    def check(self, query_token: Optional[str], cookies: Mapping[str, str], host: Optional[str]) -> Verdict:
        """Whether a request with these may be served (see the module docstring)."""
        if self.loopback_only and (host or "").lower() not in self.hosts:
            return Verdict(False, f"the Host header {host!r} is not this machine's page; open the URL 'ma-submit ui' "
                           "printed")
        if query_token is not None:
            if self._same(query_token, self.token):
                return Verdict(True, set_cookie=True)
            return Verdict(False, "the token in the URL is not this server's; open the URL ma-submit ui printed")
        if self._same(cookies.get(self.cookie), self.token):
            return Verdict(True)
        return Verdict(False, "this page needs the token that 'ma-submit ui' printed at start; open the URL it printed")

    def check_post(self, csrf: Optional[str], origin: Optional[str], host: Optional[str]) -> Verdict:
        """Whether an action's form is this server's own: its CSRF value, and an Origin (when sent) of this page."""
        if origin is not None and origin not in (f"http://{host}", f"https://{host}"):
            return Verdict(False, f"the action came from another site ({origin}); use the buttons of this page")
        if not self._same(csrf, self.csrf):
            return Verdict(False, "the action's form is not this page's own (CSRF check failed); reload the page")
        return Verdict(True)
