"""The local backend: emulates a multi-host job on this machine by running the real shim once per host.

Modules: :mod:`.backend` (``LocalBackend``, the ``Backend`` implementation), :mod:`.plan` (pure spec -> per-host
commands), :mod:`.runner` (the detached job runner process), :mod:`.jobdir` (the job's folder and its
processes), :mod:`.hostnet` (host addresses: loopback or network namespaces).
"""

from __future__ import annotations

from .backend import NETWORK_MODES, LocalBackend, create_backend

__all__ = ["NETWORK_MODES", "LocalBackend", "create_backend"]
