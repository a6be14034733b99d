"""The local backend: emulates a multi-host job on this machine by running the real shim once per host.

Modules: :mod:`.backend` (``LocalBackend``, the ``Backend`` implementation), :mod:`.plan` (pure spec -> per-host
commands), :mod:`.runner` (the detached job runner process), :mod:`.jobdir` (the job's folder, its one layout,
and its processes), :mod:`.state` (``state.json``), :mod:`.hostnet` (host addresses: loopback or network
namespaces), :mod:`.inside` (events, usage, exec), :mod:`.hostops` (a host lost for good and brought back, as a
platform does), :mod:`.consolelog`, :mod:`.options` (what the registry asks without loading the rest),
:mod:`.queue` (jobs wait until the machine has their devices), :mod:`.profile` (``local.capacity``).

The package itself imports nothing: asking :mod:`.options` (the registry's facts) loads no other module of it, and
the opener (:mod:`malaunch.sdk.opening`) imports :mod:`.backend` when the backend is opened.
"""

from __future__ import annotations

__all__: list[str] = []
