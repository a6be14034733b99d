"""Backends that run a job, by name, imported lazily: ``local`` (default) now; ``modelarts`` and ``volcano`` later.

``get_backend(name, **options)`` imports ``<module>`` only when that backend is asked for, so heavy client
libraries never slow down ``ma-submit --help``. Each backend module exports ``create_backend(**options)``.
A name that is known but whose module is not in this release raises
:class:`~malaunch.sdk.errors.BackendNotAvailable` (exit code 2), never a fake backend.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any, Mapping, Tuple

from ..errors import BackendError, BackendNotAvailable, ConfigError
from ..spec import BACKEND_NAMES
from .base import Backend, JobHandle, make_job_id

__all__ = ["BACKEND_MODULES", "Backend", "JobHandle", "available_backends", "get_backend", "make_job_id"]

#: Backend name -> module exporting ``create_backend``.
BACKEND_MODULES: Mapping[str, str] = {
    "local": "malaunch.sdk.backends.local",
    "modelarts": "malaunch.sdk.backends.modelarts",
    "volcano": "malaunch.sdk.backends.volcano",
}


def _module_exists(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def available_backends() -> Tuple[str, ...]:
    """Names whose implementation is installed."""
    return tuple(name for name, module in BACKEND_MODULES.items() if _module_exists(module))


def get_backend(name: str, **options: Any) -> Backend:
    """The backend called ``name``, created with ``options`` (e.g. ``home=`` for ``local``).

    Raises:
        ConfigError: an unknown name.
        BackendNotAvailable: a known name that is not implemented in this release.
        BackendError: the backend's module failed to import (a missing dependency).
    """
    if name not in BACKEND_MODULES or name not in BACKEND_NAMES:
        raise ConfigError(f"unknown backend {name!r}", name, f"use one of: {', '.join(BACKEND_MODULES)}")
    module_name = BACKEND_MODULES[name]
    if not _module_exists(module_name):
        raise BackendNotAvailable(name, ", ".join(available_backends()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendError(
            f"backend {name!r} cannot be loaded: {exc}; install its dependencies (pip install malaunch[{name}])"
        ) from None
    backend = module.create_backend(**options)
    if not isinstance(backend, Backend):
        raise BackendError(f"backend module {module_name} returned {type(backend).__name__}, not a Backend")
    return backend
