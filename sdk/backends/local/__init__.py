"""The local backend: emulates a multi-host job on this machine by running the real shim once per host.

Modules: :mod:`.backend` (``LocalBackend``, the ``Backend`` implementation), :mod:`.plan` (pure spec -> per-host
commands), :mod:`.runner` (the detached job runner process), :mod:`.jobdir` (the job's folder, its one layout,
and its processes), :mod:`.state` (``state.json``), :mod:`.hostnet` (host addresses: loopback or network
namespaces), :mod:`.inside` (events, usage, exec), :mod:`.hostops` (a host lost for good and brought back, as a
platform does), :mod:`.consolelog`, :mod:`.options` (what the registry asks without loading the rest),
:mod:`.queue` (jobs wait until the machine has their devices), :mod:`.profile` (``local.capacity``).

The names below are imported on first use, so asking :mod:`.options` loads nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import NETWORK_MODES, LocalBackend, create_backend

__all__ = ["NETWORK_MODES", "LocalBackend", "create_backend"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(".backend", __name__), name)
