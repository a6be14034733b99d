"""The name service a run asks for the master's address: a host name to its first IPv4 address.

A run waits for the master's name to resolve (:func:`.prepare.wait_for_address`, peers' records appear late); a dry
run resolves no name. So planning takes the resolver from the run phase (:meth:`..runphase.RunPhase.resolve`), and a
dry run never loads ``socket`` (13.5M instructions of its imports, docs/performance.md).
"""

from __future__ import annotations

import socket

__all__ = ["resolve_ipv4"]


def resolve_ipv4(name: str) -> str:
    """``name``'s first IPv4 address, as the name service gives it.

    Raises:
        OSError: the name does not resolve (yet).
        UnicodeError: the name cannot be a host name.
    """
    infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
    return str(infos[0][4][0])
