"""A host's link to the job's coordinator: join, heartbeats both ways, commands in, accounts out.

:class:`HostLink` runs one thread. It connects to the coordinator on the master host (retrying until
``join_wait`` at the start, ``host_wait`` after a loss), proves itself (:mod:`.wire`), sends a heartbeat every
``interval`` seconds and reads what the coordinator says:

- ``start`` / ``finish`` go to the attempt loop (:meth:`HostLink.next_command`);
- ``end`` (another host failed or was lost, or every host's ranks are silent or ended: hung) goes to the running
  attempt's supervisor, as a :class:`~..events.HostsEnd` event (:meth:`HostLink.attach`);
- ``silent`` (hang detection) tells the coordinator when this host's ranks went silent, spoke again, or all
  exited while its launcher winds down;
- ``parts`` tells it which ranks' parts of a save this host's checkpoint folder holds, and ``saved`` (every rank's
  part is held by some host) goes to :attr:`HostLink.on_saved` on this thread, before any later command
  (:mod:`.saves`); after each join :attr:`HostLink.on_joined` reports those parts again (one lost with a
  connection is sent again).

Nothing heard from the coordinator for ``timeout`` seconds, or its connection closed: the coordinator (the
master host) is lost. The running attempt ends (``HostsEnd``) and the link tries to join again; a coordinator
that comes back (the master host replaced) gets this host's last attempt in the hello, so the job goes on
after it, and the newest checkpoint this host heard complete (:attr:`HostLink.heard`), so every host resumes from
the one the job's hosts completed together. If none answers within ``host_wait`` the attempt loop gets
:class:`Gone` (exit 75).
"""

from __future__ import annotations

import contextlib
import queue
import select
import socket
import threading
import time
from typing import Callable, NamedTuple, Optional, Tuple, Union

from ..events import Event, HostsEnd
from . import messages, wire
from .messages import Cause, End, Failing, Finish, Heartbeat, Hello, Over, Prepared, Silent, Start, Welcome, Why

__all__ = ["Command", "Finish", "Gone", "HostLink", "Start"]


class Gone(NamedTuple):
    why: str  # the coordinator was lost and did not come back


#: What the attempt loop gets: the coordinator's ``start`` or ``finish``, or :class:`Gone`.
Command = Union[Start, Finish, Gone]


_SEND_WAIT = 5.0  # a send blocks at most this long (a coordinator that stopped reading)
_HUNG_LINE = ("ma-entrypoint: the job is hung: the ranks of every host are silent or have exited, and a host's "
              "ranks are silent: this host's attempt ends with it")  # fmt: skip


class _Lost(Exception):
    pass


class HostLink:
    """This host's side of the coordinator (see the module's docstring)."""

    def __init__(self, key: bytes, host: int, addr: str, master: str, port: int, interval: float, timeout: float,
                 join_wait: float, host_wait: float, say: Callable[[str], None], log: str = "") -> None:  # fmt: skip
        self.key, self.host, self.addr, self.master, self.port = key, host, addr, master, port
        self.interval, self.timeout, self.join_wait, self.host_wait = interval, timeout, join_wait, host_wait
        self.say, self.log = say, log  # log: this host's log folder (the hello says it)
        self.commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self.last_attempt = -1  # the last attempt this host started (the hello says it)
        self.ready = True  # this host's prepare steps are done (the hello says it; :meth:`prepared`)
        self._failed_prepare: Optional[Prepared] = None  # said again on every join: the job ends with it
        self.gone: Optional[Tuple[str, float]] = None  # the coordinator lost: why, until when it is joined again
        self._ends = _Ends()  # where an ``end`` goes
        self.on_saved: Optional[Callable[[messages.Saved], None]] = None  # writes a checkpoint's marker (:mod:`.saves`)
        self.on_joined: Callable[[], None] = lambda: None  # after each join: the parts held, reported again
        self.heard: Callable[[], Optional[messages.Resume]] = lambda: None  # the newest save heard of (the hello)
        self._send_lock = threading.Lock()
        self._sock: Optional[socket.socket] = None
        self._channel: Optional[wire.Channel] = None
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="malaunch-hostlink", daemon=True)

    def start(self) -> HostLink:
        self._thread.start()
        return self

    # -- the attempt loop's side ---------------------------------------------------------------------------------
    def next_command(self, wait: Callable[[float], bool]) -> Optional[Command]:
        """The coordinator's next command; None when ``wait`` (a stop signal's wait) said stop first."""
        while True:
            try:
                return self.commands.get(timeout=0.05)
            except queue.Empty:
                if wait(0.0):
                    return None

    def attach(self, post: Optional[Callable[[Event], None]]) -> None:
        """Where an ``end`` goes while an attempt runs (None: no attempt runs); see :class:`_Ends`."""
        self._ends.attach(post, self.last_attempt)

    def failing(self, attempt: int, hold: float = 0.0) -> None:
        """This host's attempt is ending after a failure of its own; ``hold``: the failure's log says a peer
        failed, and this host holds its stop that long (the coordinator holds the others' end as long)."""
        self.send(Failing(attempt, hold))

    def silent(self, attempt: int, silent: bool, ended: bool = False) -> None:
        """This host's ranks went silent (True) or spoke again (False), or all exited while its launcher winds
        down (``ended``): hang detection is the job's."""
        self.send(Silent(attempt, silent, ended))

    def over(self, attempt: int, cause: Optional[Cause]) -> None:
        """This host's attempt ended; ``cause`` is its root cause (None: its ranks succeeded)."""
        self.send(Over(attempt, cause))

    def prepared(self, cause: Optional[Cause]) -> None:
        """This host's prepare steps ended (``cause`` None: they succeeded; else the step that failed)."""
        self.ready = cause is None
        message = Prepared(cause)
        if cause is not None:
            self._failed_prepare = message  # a link not joined yet (or joining again) says it once joined
        self.send(message)

    @property
    def ended(self) -> bool:
        """The link is over for good: the coordinator finished the job, or was lost and did not come back."""
        return self._closing.is_set()

    def close(self) -> None:
        self._closing.set()
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(2.0)

    # -- the thread ----------------------------------------------------------------------------------------------
    def send(self, message: messages.Message) -> None:
        """Send ``message``; one lost with the connection is not sent again by the link (the next hello says the
        host's state; :attr:`on_joined` reports its parts again)."""
        with self._send_lock:
            sock, channel = self._sock, self._channel
            if sock is None or channel is None:
                return  # lost: the coordinator learns this host's state from its next hello
            with contextlib.suppress(OSError, wire.WireError):  # the reader notices the loss
                sock.sendall(channel.seal(message.to_wire()))

    def _run(self) -> None:
        wait = self.join_wait
        while not self._closing.is_set():
            why = self._session(time.monotonic() + wait)
            if self._closing.is_set():
                return
            post = self._ends.post
            if post is not None:
                post(HostsEnd(f"ma-entrypoint: host 0 ({self.master}) lost: {why}"))
            wait = self.host_wait
            self.gone = (why, time.time() + self.host_wait)
            self.say(f"lost the job's coordinator (host 0, {self.master}:{self.port}): {why}; joining it again "
                     f"for up to {self.host_wait:g} s")  # fmt: skip

    def _session(self, deadline: float) -> str:
        """Join and serve one connection; returns why it ended. Puts :class:`Gone` when joining fails."""
        try:
            buffer = self._join(deadline)
        except _Lost as lost:
            self.commands.put(Gone(str(lost)))
            self._closing.set()
            return str(lost)
        try:
            self.on_joined()
            return self._serve(buffer)
        finally:
            with self._send_lock:
                sock, self._sock, self._channel = self._sock, None, None
            if sock is not None:
                sock.close()

    def _join(self, deadline: float) -> bytes:
        problem = "nothing answered"
        while not self._closing.is_set():
            if time.monotonic() >= deadline:
                raise _Lost(f"no coordinator answered at {self.master}:{self.port} ({problem})")
            try:
                return self._handshake()
            except (OSError, wire.WireError, ValueError) as error:
                problem = str(error)[:120] or type(error).__name__
                time.sleep(0.2)
        raise _Lost("closing")

    def _handshake(self) -> bytes:
        sock = socket.create_connection((self.master, self.port), timeout=min(5.0, self.timeout))
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            first, rest = _read_line(sock, b"")
            channel = wire.Channel(self.key, wire.read_challenge(first), "c")
            hello = Hello(self.host, self.addr, self.last_attempt, self.log, self.ready, self.heard())
            sock.sendall(channel.seal(hello.to_wire()))
            line, rest = _read_line(sock, rest)
            welcome = channel.open(line)
            if not isinstance(messages.parse(welcome), Welcome):
                raise wire.WireError("malformed", f"expected a welcome, got {welcome.get('t')!r}")
        except BaseException:
            sock.close()
            raise
        with self._send_lock:
            self._sock, self._channel = sock, channel
        self.gone = None
        if self._failed_prepare is not None:
            self.send(self._failed_prepare)
        elif self.ready and not hello.prepared:  # the steps ended while it joined: their end was not sent
            self.send(Prepared(None))
        return rest

    def _serve(self, buffer: bytes) -> str:
        sock, channel = self._sock, self._channel
        assert sock is not None and channel is not None
        heard = beat = time.monotonic()
        sock.settimeout(_SEND_WAIT)
        poller = select.poll()  # not select.select: it refuses a descriptor of 1,024 or more (a shim with many open)
        poller.register(sock, select.POLLIN)
        while not self._closing.is_set():
            now = time.monotonic()
            if now - heard > self.timeout:
                return f"no heartbeat for {self.timeout:g} s"
            if now >= beat:
                beat = now + self.interval
                self.send(Heartbeat())
            while b"\n" in buffer:
                line, _, buffer = buffer.partition(b"\n")
                try:
                    self._dispatch(messages.parse(channel.open(line + b"\n")))
                except wire.WireError as error:
                    return f"it sent a line this host refuses ({error.kind})"
                heard = time.monotonic()
            try:  # wake for the next beat whatever arrives; sends keep the socket's own (longer) timeout
                if not poller.poll(max(10, int(min(beat - time.monotonic(), 0.5) * 1000))):
                    continue
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except (OSError, ValueError) as error:
                return f"its connection broke ({getattr(error, 'strerror', None) or error})"
            if not chunk:
                return "its connection closed"
            buffer += chunk
            if len(buffer) > 4 * wire.MAX_LINE and b"\n" not in buffer:
                return "it sent an oversized line"
        return "closing"

    def _dispatch(self, message: Optional[messages.Message]) -> None:
        if isinstance(message, messages.Saved) and self.on_saved is not None:
            self.on_saved(message)
        elif isinstance(message, (Start, Finish)):
            self.commands.put(message)
            if isinstance(message, Finish):
                self._closing.set()
        elif isinstance(message, End):
            self._ends.end(message, self.last_attempt)


class _Ends:
    """Where the coordinator's ``end`` goes: the running attempt's supervisor (:meth:`HostLink.attach`). An ``end``
    of an attempt not attached yet (another host failed the moment the attempt started; this host may not even have
    read its ``start``) is kept, and posted when that attempt attaches; never to a later one."""

    def __init__(self) -> None:
        self.post: Optional[Callable[[Event], None]] = None
        self.early: Optional[End] = None
        self.lock = threading.Lock()  # the attempt's thread attaches, the link's thread ends

    def attach(self, post: Optional[Callable[[Event], None]], attempt: int) -> None:
        with self.lock:
            self.post, early, self.early = post, self.early, None
        if post is not None and early is not None and early.attempt == attempt:
            post(_end_event(early))

    def end(self, message: End, attempt: int) -> None:
        """``message`` came while ``attempt`` is this host's last started."""
        with self.lock:
            post = self.post if message.attempt == attempt else None
            if post is None and message.attempt >= attempt:
                self.early = message
        if post is not None:
            post(_end_event(message))


def _end_event(message: End) -> HostsEnd:
    """What the running attempt's supervisor gets for the coordinator's ``end``."""
    if message.why is Why.HUNG:
        return HostsEnd(_HUNG_LINE, hung=True)
    if message.why is Why.JOINED:
        return HostsEnd(_host_line(message.host, message.addr or "?", "joined", "so that the next attempt takes it in"))
    return HostsEnd(_host_line(message.host, message.addr or "?", message.why.value))


def _host_line(host: Optional[int], addr: str, why: str, then: str = "with it") -> str:
    name = f"host {host}" if host is not None else "a host"
    return f"ma-entrypoint: {name} ({addr}) {why}: this host's attempt ends {then}"


def _read_line(sock: socket.socket, buffer: bytes) -> Tuple[bytes, bytes]:
    while b"\n" not in buffer:
        chunk = sock.recv(4096)
        if not chunk:
            raise wire.WireError("malformed", "the connection closed during the handshake")
        buffer += chunk
        if len(buffer) > wire.MAX_LINE:
            raise wire.WireError("oversized", "handshake line")
    line, _, rest = buffer.partition(b"\n")
    return line + b"\n", rest
