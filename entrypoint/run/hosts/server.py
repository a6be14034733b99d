"""The coordinator the master host's shim serves: one thread, one selector, every host's connection.

It speaks :mod:`.wire` (its messages: :mod:`.messages`) and keeps the job's book in :class:`~.jobstate.JobState`.
Nothing a client sends can crash or stall it: every socket is non-blocking, a line is at most
:data:`~.wire.MAX_LINE` bytes, a connection that has not proved itself within :data:`HELLO_WITHIN` seconds is
closed, so is one whose unsent output grows past :data:`_OUT_CAP`, and past :attr:`Coordinator.max_conns`
connections new ones are closed at once. What is refused (a line unproved, replayed or oversized, or a proved
message with a malformed field) is said once per kind (``refused a connection from ADDR: bad_mac``), then only
counted.

Heartbeats: every ``interval`` seconds the coordinator sends each host a ``hb``; a host it has heard nothing
from for ``timeout`` seconds (a frozen or partitioned shim) is lost, as is one whose connection closed.
"""

from __future__ import annotations

import contextlib
import json
import selectors
import socket
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from . import messages, wire
from .jobstate import JobState, Send
from .saves import SaveBook

__all__ = ["HELLO_WITHIN", "Coordinator"]

HELLO_WITHIN = 5.0
_OUT_CAP = 1 << 18
_TICK = 0.05


class _Conn:
    __slots__ = ("addr", "born", "channel", "host", "inbuf", "last", "outbuf", "sock")

    def __init__(self, sock: socket.socket, addr: str, channel: wire.Channel, now: float) -> None:
        self.sock, self.addr, self.channel = sock, addr, channel
        self.born = self.last = now
        self.host: Optional[int] = None
        self.inbuf = b""
        self.outbuf = b""


class Coordinator:
    """Serve the job's coordinator on ``port`` (all addresses) until :meth:`close`."""

    def __init__(self, key: bytes, state: JobState, port: int, interval: float, timeout: float,
                 say: Callable[[str], None], bind: str = "") -> None:  # fmt: skip
        self.key, self.state, self.interval, self.timeout, self.say = key, state, interval, timeout, say
        self.max_conns = 2 * state.num_hosts + 64
        self.listener = _listener(bind, port, min(4096, max(128, 2 * state.num_hosts)))
        self.port = int(self.listener.getsockname()[1])
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.conns: Dict[int, _Conn] = {}  # fd -> connection
        self.refused: Dict[str, int] = {}  # kind -> count
        self.watch: Optional[Callable[[JobState], None]] = None  # after each change of the book (:mod:`.bookwatch`)
        self.saves = SaveBook(state)  # the running attempt's saves, completed through the hosts' reports (.saves)
        self._stop, self._beat_at, self._tick_at = threading.Event(), 0.0, 0.0
        self.thread = threading.Thread(target=self._loop, name="malaunch-coordinator", daemon=True)

    def start(self) -> Coordinator:
        self.thread.start()
        return self

    def close(self, linger: float = 3.0) -> None:
        """Stop serving once what was sent is flushed (at most ``linger`` seconds), then close everything."""
        until = time.monotonic() + linger
        while time.monotonic() < until and any(conn.outbuf for conn in list(self.conns.values())):
            time.sleep(0.02)
        self._stop.set()
        self.thread.join(2.0)
        for conn in list(self.conns.values()):
            self._drop(conn)
        self.selector.close()
        self.listener.close()

    # -- the loop ---------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            for key, mask in self.selector.select(_TICK):
                if key.data is None:
                    self._accept()
                    continue
                conn: _Conn = key.data
                if mask & selectors.EVENT_READ:
                    self._read(conn)
                if mask & selectors.EVENT_WRITE and conn.sock.fileno() in self.conns:
                    self._flush(conn)
            self._tick(time.monotonic())

    def _tick(self, now: float) -> None:
        if now < self._tick_at:  # at most every _TICK seconds, however often a line wakes the loop
            return
        self._tick_at = now + _TICK
        for conn in list(self.conns.values()):
            if conn.host is None and now - conn.born > HELLO_WITHIN:
                self._refuse(conn, "slow", f"no hello within {HELLO_WITHIN:g} s")
            elif conn.host is not None and now - conn.last > self.timeout:
                self._gone(conn, f"no heartbeat for {self.timeout:g} s")
        self._apply(self.state.advance(now))
        if now >= self._beat_at:
            self._beat_at = now + self.interval
            for conn in list(self.conns.values()):
                if conn.host is not None:
                    self._send(conn, messages.Heartbeat())

    def _accept(self) -> None:
        try:
            sock, peer = self.listener.accept()
        except OSError:
            return
        addr = str(peer[0])
        if len(self.conns) >= self.max_conns:
            self._note("flood", addr, f"more than {self.max_conns} connections")
            sock.close()
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        hello = wire.challenge()
        conn = _Conn(sock, addr, wire.Channel(self.key, hello["nonce"], "s"), time.monotonic())
        self.conns[sock.fileno()] = conn
        self.selector.register(sock, selectors.EVENT_READ, conn)
        self._queue(conn, (_json_line(hello)))

    def _read(self, conn: _Conn) -> None:
        try:
            chunk = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._gone(conn, "its connection closed")
            return
        conn.inbuf += chunk
        while conn.sock.fileno() in self.conns:
            line, newline, rest = conn.inbuf.partition(b"\n")
            if not newline:
                if len(conn.inbuf) > wire.MAX_LINE:
                    self._refuse(conn, "oversized", f"a line over {wire.MAX_LINE} bytes")
                return
            conn.inbuf = rest
            try:
                message = conn.channel.open(line + b"\n")
            except wire.WireError as error:
                self._refuse(conn, error.kind, str(error))
                return
            conn.last = time.monotonic()
            self._handle(conn, message)

    def _handle(self, conn: _Conn, payload: Dict[str, Any]) -> None:
        try:
            message = messages.parse(payload)
        except wire.WireError as error:
            self._refuse(conn, error.kind, str(error))
            return
        now = time.monotonic()
        if conn.host is None:
            if not isinstance(message, messages.Hello):
                self._refuse(conn, "malformed", "the first message is not a hello")
            elif not 0 <= message.host < self.state.num_hosts:
                said = f"host {message.host} is not one of the job's {self.state.num_hosts}"
                self._refuse(conn, "unknown_host", said)
            else:
                old = self.state.hosts.conn(message.host)
                if isinstance(old, _Conn) and old is not conn:
                    self._drop(old)  # the book hears of it from join(): a new shim in its place
                conn.host = message.host
                self.saves.heard(message.resume)  # before the start this hello may bring
                self._apply(self.state.join(message.host, conn, message.addr or conn.addr, message.last, now,
                                            message.log, message.prepared))  # fmt: skip
            return
        if isinstance(message, messages.Failing):  # the book caps the hold (NaN: no hold)
            self._apply(self.state.failing(conn.host, message.attempt, now, message.hold))
        elif isinstance(message, messages.Silent):
            self._apply(self.state.silent(conn.host, message.attempt, message.silent, now, message.ended))
        elif isinstance(message, messages.Over):
            self._apply(self.state.over(conn.host, message.attempt, message.cause, now))
        elif isinstance(message, messages.Prepared):
            self._apply(self.state.prepared(conn.host, message.cause, now))
        elif isinstance(message, messages.Parts):  # every host is told once the hosts hold every part
            self._apply(self.saves.parts(self.state.attempt, conn.host, message))

    # -- sending and dropping -----------------------------------------------------------------------------------
    def _apply(self, sends: List[Send]) -> None:
        for send in sends:
            targets = list(self.state.hosts.here) if send.to is None else [send.to]
            for host in targets:
                target = self.state.hosts.conn(host)
                if isinstance(target, _Conn):
                    self._send(target, send.message)
        watch = self.watch
        if watch is not None:
            watch(self.state)

    def _send(self, conn: _Conn, message: messages.Message) -> None:
        try:
            self._queue(conn, conn.channel.seal(message.to_wire()))
        except wire.WireError as error:
            self.say(f"coordinator: cannot send {message.to_wire()['t']!r} to host {conn.host}: {error}")

    def _queue(self, conn: _Conn, data: bytes) -> None:
        conn.outbuf += data
        if len(conn.outbuf) > _OUT_CAP:
            self._gone(conn, "it stopped reading")
            return
        self._flush(conn)

    def _flush(self, conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.outbuf) if conn.outbuf else 0
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._gone(conn, "its connection broke")
            return
        conn.outbuf = conn.outbuf[sent:]
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.outbuf else 0)
        self.selector.modify(conn.sock, events, conn)

    def _gone(self, conn: _Conn, why: str) -> None:
        """The connection is over (closed, broken, silent): dropped, and the book told if it was a host's."""
        host = conn.host
        self._drop(conn)
        if host is not None:
            self._apply(self.state.leave(host, conn, why, time.monotonic()))

    def _refuse(self, conn: _Conn, kind: str, detail: str) -> None:
        self._note(kind, conn.addr, detail)
        self._drop(conn)

    def _note(self, kind: str, addr: str, detail: str) -> None:
        self.refused[kind] = self.refused.get(kind, 0) + 1
        if self.refused[kind] == 1:
            self.say(f"coordinator: refused a connection from {addr}: {detail} (said once; later ones are counted)")

    def _drop(self, conn: _Conn) -> None:
        fd = conn.sock.fileno()
        if fd >= 0 and self.conns.pop(fd, None) is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(conn.sock)
        conn.sock.close()


def _listener(bind: str, port: int, backlog: int) -> socket.socket:
    """A non-blocking TCP socket listening on ``(bind, port)``."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((bind, port))
    listener.listen(backlog)
    listener.setblocking(False)
    return listener


def _json_line(payload: Dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode() + b"\n"
