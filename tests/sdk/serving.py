"""Stopping the tests' loopback HTTP servers (the fake ModelArts and Kubernetes APIs, the webhook receiver) at once.

``socketserver``'s ``shutdown()`` only sets a flag and waits for ``serve_forever`` to look at it, which it does when
a connection comes or its ``select`` times out: every ``poll_interval`` (0.5 s by default). With no request
left, each stop waited up to that long (0.34 s on average over the ModelArts API tests' teardowns, a quarter of
those files' time). :func:`stop_serving` wakes the loop with a connection of its own once the flag is set,
and so waits for the loop's end, not for its timer.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading

__all__ = ["stop_serving"]


def stop_serving(server: socketserver.TCPServer) -> None:
    """End ``server.serve_forever()`` (running in another thread) and close the server's socket.

    ``shutdown()`` runs in a thread of its own; until it returns, a connection to the listening socket wakes the
    loop, which then sees the flag (a wake that came before the flag was set is served as an empty request, and
    the next one ends the loop)."""
    stopper = threading.Thread(target=server.shutdown, name="stop-serving", daemon=True)
    stopper.start()
    host, port = server.server_address[:2]
    while stopper.is_alive():
        with contextlib.suppress(OSError):
            socket.create_connection((str(host), int(port)), timeout=1).close()
        stopper.join(0.05)
    server.server_close()
