"""``ma-submit ui``'s server: the standard library's threading HTTP server, the routes, and :func:`serve`.

Routes (every one behind :class:`~.auth.Guard`; every answer ``no-store``, with a Content-Security-Policy that
allows only this server's own script and style, so even a text that escaped escaping could run nothing):

- ``GET /`` the jobs (``state``, ``name``, ``backend``, ``offset``); ``GET /job?b=&id=`` a job; ``GET /part``
  one part of a job's page (``summary``, ``timeline``, ``progress``, ``events``, ``usage``) for the script to refresh;
  ``GET /log`` a log's lines from an offset as JSON (``file``: one of the job's own log files, none: every
  host's lines merged through ``Backend.logs``; ``q``: only lines holding it); ``GET /confirm`` the question
  before an action; ``GET /sweeps``, ``GET /sweep?id=``; ``GET /static/app.js|app.css``.
- ``POST /action`` (``stop``, ``delete``; CSRF-checked): what ``ma-submit stop|delete`` do, and their lines.
"""

from __future__ import annotations

import contextlib
import errno
import http.cookies
import http.server
import importlib.resources
import json
import socket
import sys
import threading
import time
import webbrowser
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

from ..backends.base import Backend
from ..backends.checkpoints import CheckpointListing
from ..backends.listing import ListQuery
from ..backends.registry import runs_here
from ..errors import ConfigError, JobNotFound, MalaunchError, SweepNotFound
from ..status import JobState, JobStatus
from ..sweep.api import attach_sweep, list_sweeps
from ..sweep.results import rank_results, rows_of
from . import pages
from .auth import LOOPBACK, Guard
from .kept import KeptReads
from .listing import Lister, count_restarts
from .logfiles import LogRefused, host_folders, list_logs, read_log
from .markup import Markup
from .opening import open_file, remove_open_file
from .timeline import timeline_of
from .usage import UsageWatch

__all__ = ["PAGE_SIZE", "UiApp", "UiServer", "serve", "start"]

#: Jobs per page.
PAGE_SIZE = 50
_MERGED_MAX = 2000  # lines of the merged view sent at once
_BODY_MAX = 1 << 16  # the most bytes of a request's body: an action's form is a few hundred
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make a form's Origin "null", which the CSRF check refuses
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
_STATIC = {"/static/app.js": "application/javascript; charset=utf-8", "/static/app.css": "text/css; charset=utf-8"}


class UiApp:
    """What the handlers share: the guard, the backends shown (opened once each), the lister, the usage samplers."""

    def __init__(self, guard: Guard, names: Sequence[str], opener: Callable[[str], Backend], home: str) -> None:
        self.guard = guard
        self.names = tuple(names)
        self.opener = opener
        self.home = home
        self.lister = Lister()
        self.usage = UsageWatch()
        self.checkpoints: KeptReads[CheckpointListing] = KeptReads()  # the progress part's rows, per lifetime
        self.progress: KeptReads[JobStatus] = KeptReads()  # a cloud job's progress from its hosts' logs, likewise
        self._opened: Dict[str, Backend] = {}
        self._lock = threading.Lock()
        self.static = {path: importlib.resources.files(__package__).joinpath(path.lstrip("/")).read_bytes()
                       for path in _STATIC}  # fmt: skip

    def backend(self, name: str) -> Backend:
        """Backend ``name`` (one of those shown), opened on first use; raises what opening it raises."""
        if name not in self.names:
            raise ConfigError("no such backend on this page", name, f"use one of {', '.join(self.names)}")
        with self._lock:
            found = self._opened.get(name)
        if found is None:
            found = self.opener(name)
            found.progress = None  # the page shows what a backend says in place: no note (a retry) on the terminal
            with self._lock:
                self._opened[name] = found
        return found

    def sources(self, only: str = "") -> Dict[str, Callable[[], Backend]]:
        """The backends to list (``only`` one of them when given)."""
        names = [only] if only in self.names else list(self.names)
        return {name: (lambda name=name: self.backend(name)) for name in names}  # type: ignore[misc]

    def close(self) -> None:
        """Stop the samplers and the lister's pool."""
        self.usage.close()
        self.lister.close()


class Answer(NamedTuple):
    """What a route answers: a status, a body and its type, more headers."""

    code: int
    body: bytes
    kind: str = "text/html; charset=utf-8"
    headers: Tuple[Tuple[str, str], ...] = ()


def _page(markup: Markup, code: int = 200) -> Answer:
    return Answer(code, markup.encode("utf-8"))


def _one(query: Mapping[str, List[str]], key: str, default: str = "") -> str:
    values = query.get(key)
    return values[-1] if values else default


def _int(text: str, default: int = 0) -> int:
    return int(text) if text.isascii() and text.isdigit() and len(text) < 16 else default


def _folders(status: JobStatus) -> List[str]:
    """The job's host folders on this machine (none for a job that runs elsewhere)."""
    return host_folders(status.location, [host.log_file for host in status.hosts])


class Handler(http.server.BaseHTTPRequestHandler):
    """One request: checked by the guard, then routed."""

    server: UiServer
    protocol_version = "HTTP/1.1"
    server_version = "malaunch-ui"
    sys_version = ""
    timeout = 30.0  # seconds a connection may stay silent (mid-request or idle between requests): then it is closed
    body = b""  # the request's body, read whole before it is checked (:meth:`_read_body`)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the terminal shows only what ``ma-submit ui`` says."""

    # -- plumbing --------------------------------------------------------------------------------------------
    def _send(self, answer: Answer) -> None:
        self.send_response(answer.code)
        for key, value in (*_HEADERS.items(), *answer.headers):
            self.send_header(key, value)
        self.send_header("Content-Type", answer.kind)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(answer.body)

    def _cookies(self) -> Dict[str, str]:
        jar = http.cookies.SimpleCookie()
        try:
            jar.load(self.headers.get("Cookie") or "")
        except http.cookies.CookieError:
            return {}
        return {key: morsel.value for key, morsel in jar.items()}

    def _refused(self, why: str) -> Answer:
        return _page(pages.message_page("Refused", why), 403)

    def _read_body(self) -> Optional[Answer]:
        """Read the request's body whole into :attr:`body`, before anything else looks at the request: what is left
        unread on the connection would be read as the next request (one smuggled in a form's body). A body without
        a length, a length that is no number and one over :data:`_BODY_MAX` are refused, and the connection then
        closed (its unread bytes are never a request)."""
        length = self.headers.get("Content-Length")
        why = ""
        if self.headers.get("Transfer-Encoding") is not None:
            code, why = 411, "a body in chunks (Transfer-Encoding) is not read; send it with a Content-Length"
        elif length is not None and not (length.isascii() and length.isdigit()):
            code, why = 400, f"the Content-Length {length[:40]!r} is not a number of bytes; send the form's own"
        elif length is not None and int(length) > _BODY_MAX:
            code, why = 413, f"the body is too large ({length} bytes, at most {_BODY_MAX}); use the page's forms"
        if why:
            self.close_connection = True
            return Answer(code, pages.message_page("Refused", why).encode("utf-8"), headers=(("Connection", "close"),))
        self.body = self.rfile.read(int(length)) if length else b""
        return None

    def _guarded(self, route: Callable[[str, Dict[str, List[str]]], Answer]) -> None:
        app = self.server.app
        refused = self._read_body()
        if refused is not None:
            self._send(refused)
            return
        parts = urlsplit(self.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        token = query.pop("token", None)
        verdict = app.guard.check(token[-1] if token else None, self._cookies(), self.headers.get("Host"))
        if not verdict.ok:
            self._send(self._refused(verdict.why))
            return
        if verdict.set_cookie:
            rest = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "token"])
            target = parts.path + (f"?{rest}" if rest else "")
            cookie = f"{app.guard.cookie}={app.guard.token}; Path=/; HttpOnly; SameSite=Strict"
            self._send(Answer(303, b"", headers=(("Location", target), ("Set-Cookie", cookie))))
            return
        try:
            answer = route(parts.path, query)
        except JobNotFound as error:
            answer = _page(pages.message_page("Not found", str(error)), 404)
        except SweepNotFound as error:
            answer = _page(pages.message_page("Not found", str(error)), 404)
        except LogRefused as error:
            answer = Answer(403, json.dumps({"error": str(error)}).encode(), "application/json")
        except MalaunchError as error:
            answer = _page(pages.message_page("Error", str(error)), 502)
        self._send(answer)

    def do_GET(self) -> None:
        self._guarded(self._get)

    def do_HEAD(self) -> None:
        self._guarded(self._get)

    def do_POST(self) -> None:
        self._guarded(self._post)

    # -- routes ----------------------------------------------------------------------------------------------
    def _get(self, path: str, query: Dict[str, List[str]]) -> Answer:
        app = self.server.app
        if path in app.static:
            return Answer(200, app.static[path], _STATIC[path])
        if path == "/":
            return self._jobs(query)
        if path in ("/job", "/part", "/log", "/confirm"):
            name, job_id = _one(query, "b"), _one(query, "id")
            backend = app.backend(name)
            if path == "/log":
                return self._log(backend, name, job_id, query)
            if path == "/confirm":
                action = _one(query, "action")
                if action not in ("stop", "delete"):
                    raise ConfigError("no such action", action, "use the page's Stop or Delete")
                return _page(pages.confirm_page(action, name, job_id, app.guard.csrf))
            status = self._status(backend, name, job_id)
            if path == "/part":
                return _page(self._part(_one(query, "name"), backend, name, status))
            return self._job(backend, name, status)
        if path == "/sweeps":
            return _page(pages.sweeps_page(list_sweeps(app.home), time.time()))
        if path == "/sweep":
            return self._sweep(_one(query, "id"))
        return _page(pages.message_page("Not found", f"no page {path}"), 404)

    def _status(self, backend: Backend, name: str, job_id: str) -> JobStatus:
        """The job's status as ``ma-submit status`` shows it, with its progress and time to recover. A job on this
        machine has them in its status; a cloud job's are read from the end of its hosts' logs, at most once per
        lifetime (:class:`.kept.KeptReads`), while its state is asked on every look."""
        status = backend.status(job_id)
        if runs_here(name):
            return status
        key = (name, status.id)
        read = self.server.app.progress.read(key, False, lambda: backend.status_with_progress(status.id))
        if read.value is None:  # the logs could not be read: the state alone, as before
            return status
        return status._replace(progress=read.value.progress, recovery=read.value.recovery)

    def _jobs(self, query: Dict[str, List[str]]) -> Answer:
        app = self.server.app
        state = _one(query, "state").upper()
        filters = pages.Filters(state if state in JobState.__members__ else "", _one(query, "name"),
                                _one(query, "backend"), _int(_one(query, "offset")))  # fmt: skip
        wanted = ListQuery(frozenset([filters.state]) if filters.state else frozenset(), filters.name or None)
        listing = app.lister.list_jobs(app.sources(filters.backend), wanted, filters.offset, PAGE_SIZE)
        return _page(pages.jobs_page(listing, filters, app.names, PAGE_SIZE, time.time()))

    def _part(self, name: str, backend: Backend, backend_name: str, status: JobStatus) -> Markup:
        now = time.time()
        if name == "summary":
            return pages.summary_part(status, count_restarts(backend, status))
        if name == "usage":
            samples, note = self.server.app.usage.read((backend_name, status.id), lambda: backend.usage(status.id))
            return pages.usage_part(samples, note)
        if name == "progress":  # a backend that cannot list them says why, in place
            key, here = (backend_name, status.id, status.state.value), runs_here(backend_name)
            listed = self.server.app.checkpoints.read(key, here, lambda: backend.checkpoints(status.id))
            return pages.progress_part(status, listed.value, listed.refused, now)
        try:
            events = backend.events(status.id)
            error = ""
        except MalaunchError as failure:
            events, error = [], str(failure)
        if name == "events":
            return pages.events_part(events, error)
        if name == "timeline":
            return pages.timeline_part(timeline_of(status, events, now), now)
        raise ConfigError("no such part of a job's page", name, "use summary, timeline, progress, events or usage")

    def _job(self, backend: Backend, name: str, status: JobStatus) -> Answer:
        names = ("summary", "timeline", "progress", "events", "usage")
        parts = {part: self._part(part, backend, name, status) for part in names}
        logs = [*list_logs(status.location, _folders(status)), ""]
        events: List[Any] = []
        with contextlib.suppress(MalaunchError):  # shown in the events part
            events = backend.events(status.id)
        line = timeline_of(status, events, time.time())
        text = pages.report_text(status, line)
        actions = ["stop"] if not status.is_terminal else []
        if status.is_terminal or status.state is JobState.UNKNOWN:
            actions.append("delete")
        return _page(pages.job_page(status, name, parts, logs, text, actions))

    def _log(self, backend: Backend, name: str, job_id: str, query: Dict[str, List[str]]) -> Answer:
        file, search, offset = _one(query, "file"), _one(query, "q"), _int(_one(query, "offset"))
        ident = backend.resolve_id(job_id)
        status = backend.status(ident)
        if file:
            chunk = read_log(status.location, _folders(status), file, offset, search or None)
            lines, next_offset = list(chunk.lines), chunk.offset
        else:
            every = list(backend.logs(ident, follow=False))
            start = offset if offset <= len(every) else 0
            fresh = every[start : start + _MERGED_MAX]
            next_offset = start + len(fresh)
            lines = [line for line in fresh if search.casefold() in line.casefold()] if search else fresh
        live = not status.is_terminal
        body = json.dumps({"lines": lines, "offset": next_offset, "live": live}, ensure_ascii=False)
        return Answer(200, body.encode("utf-8"), "application/json; charset=utf-8")

    def _sweep(self, sweep_id: str) -> Answer:
        handle = attach_sweep(sweep_id, home=self.server.app.home)
        record = handle.record()  # as recorded: reading the page starts no trial
        metric = record.get("metric") if isinstance(record.get("metric"), dict) else {}
        results = rank_results(rows_of(record), metric.get("goal") if metric else None)
        backend = str(record.get("backend") or "local")
        return _page(pages.sweep_page(handle.id, backend, results, metric or {}, time.time()))

    def _post(self, path: str, query: Dict[str, List[str]]) -> Answer:
        app = self.server.app
        form = parse_qs(self.body.decode("utf-8", errors="replace"), keep_blank_values=True)
        verdict = app.guard.check_post(_one(form, "csrf") or None, self.headers.get("Origin"), self.headers.get("Host"))
        if not verdict.ok:
            return self._refused(verdict.why)
        if path != "/action":
            return _page(pages.message_page("Not found", f"no action at {path}"), 404)
        action, name, job_id = _one(form, "action"), _one(form, "b"), _one(form, "id")
        back = pages.link("/job", b=name, id=job_id)
        try:
            backend = app.backend(name)
            if action == "stop":  # the lines of 'ma-submit stop' and 'ma-submit delete'
                status = backend.stop(backend.resolve_id(job_id))
                said = f"job {status.id} {status.state.value}"
            elif action == "delete":
                said, back = f"deleted {backend.delete(backend.resolve_id(job_id))}", "/"
            else:
                raise ConfigError("no such action", action, "use the page's Stop or Delete")
        except MalaunchError as error:
            return _page(pages.action_page(str(error), True, back), 409)
        return _page(pages.action_page(said, False, back))


class UiServer(http.server.ThreadingHTTPServer):
    """The HTTP server with the app its handlers share."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: Tuple[str, int], app_of: Callable[[int], UiApp]) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, Handler)
        self.app = app_of(self.server_address[1])

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line on stderr for what a request broke on (a bug), never a traceback on the user's terminal."""
        error = sys.exc_info()[1]
        if isinstance(error, (BrokenPipeError, ConnectionResetError)):
            return
        print(f"ma-submit: error: a request failed: {error!r}", file=sys.stderr, flush=True)


def start(host: str, port: int, names: Sequence[str], opener: Callable[[str], Backend], home: str,
          token: Optional[str] = None) -> UiServer:  # fmt: skip
    """A server bound to ``host``:``port`` (0: a free port), not yet serving. A port in use is a ConfigError."""
    try:
        return UiServer((host, port), lambda bound: UiApp(Guard(host, bound, token), names, opener, home))
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} on {host} is in use", None,
                              "pick another with --port N, or --port 0 for a free one") from None  # fmt: skip
        raise ConfigError(f"cannot listen on {host}:{port} ({error.strerror})", None,
                          "give an address of this machine with --host, e.g. 127.0.0.1") from None  # fmt: skip


def url_of(server: UiServer) -> str:
    """The URL to open, with the token."""
    host, port = str(server.server_address[0]), int(server.server_address[1])
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in host else host)
    return f"http://{shown}:{port}/?token={server.app.guard.token}"


def serve(server: UiServer, say: Callable[[str], None], open_browser: bool) -> None:
    """Serve until interrupted (Ctrl-C raises KeyboardInterrupt out of here, at once)."""
    url = url_of(server)
    host = str(server.server_address[0])
    if host not in LOOPBACK:
        say(f"warning: listening on {host}: other machines can reach this page (the token still guards it)")
    say(f"the jobs page is at {url} (Ctrl-C stops it)")
    opened = ""
    if open_browser:  # a file that sends the browser on: the token stays off its command line (see .opening)
        try:
            opened = open_file(server.app.home, int(server.server_address[1]), url)
        except OSError as error:
            say(f"warning: cannot write the file that opens the page in {server.app.home}/ui ({error.strerror}); "
                "open the URL above yourself")  # fmt: skip
        else:
            threading.Thread(target=webbrowser.open, args=(f"file://{opened}",), daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.app.close()
        server.server_close()
        if opened:
            remove_open_file(opened)
