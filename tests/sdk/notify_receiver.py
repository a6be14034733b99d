"""A webhook receiver on 127.0.0.1 for the notification tests: records every POST (headers and body), and answers
as told: a list of status codes to give first (then 200), or ``hang`` (never answers until closed). A 3xx answer
sends the browser on to ``/landed`` (its ``Location``); what comes there is recorded in ``landed``. ``on_post`` is
called as each POST arrives, before it is answered (a test looks at the machine while the sender waits)."""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import threading
from typing import Any, Callable, Dict, List, Optional

from serving import stop_serving


class Receiver:
    """``url``: where to POST; ``events``: the bodies received (parsed), in order; ``verified``: signatures."""

    def __init__(self, answers: Optional[List[int]] = None, hang: bool = False, secret: str = "",
                 on_post: Optional[Callable[[], None]] = None) -> None:  # fmt: skip
        self.answers = list(answers or [])
        self.on_post = on_post
        self.landed: List[str] = []  # the method of each request that followed a redirect
        self.hang, self.secret = hang, secret
        self.posts: List[Dict[str, Any]] = []
        self.tries = 0
        self.waiting = 0  # requests held unanswered now (``hang``)
        self.lock = threading.Lock()
        self.closing = threading.Event()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._landed()

            def _landed(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.landed.append(str(self.command))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                if self.path == "/landed":
                    self._landed()
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if receiver.on_post is not None:
                    receiver.on_post()
                with receiver.lock:
                    receiver.tries += 1
                    status = receiver.answers.pop(0) if receiver.answers else 200
                if receiver.hang:
                    with receiver.lock:
                        receiver.waiting += 1
                    receiver.closing.wait(120)
                    with receiver.lock:
                        receiver.waiting -= 1
                    return
                if status == 200:
                    with receiver.lock:
                        receiver.posts.append({"headers": dict(self.headers), "body": body,
                                               "data": json.loads(body)})  # fmt: skip
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", "/landed")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook/secret-path"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def events(self) -> List[str]:
        with self.lock:
            return [post["data"]["event"] for post in self.posts]

    def signed(self) -> bool:
        """Every post carries a valid signature of its body with the secret."""
        with self.lock:
            posts = list(self.posts)
        for post in posts:
            expected = "sha256=" + hmac.new(self.secret.encode(), post["body"], hashlib.sha256).hexdigest()
            if not hmac.compare_digest(post["headers"].get("X-Malaunch-Signature", ""), expected):
                return False
        return bool(posts)

    def close(self) -> None:
        self.closing.set()
        stop_serving(self.server)
