"""Backends that run a job, by name, imported lazily: ``local`` (default) now; ``modelarts`` and ``volcano`` later.

``get_backend(name, **options)`` imports ``<module>`` only when that backend is asked for, so heavy client
libraries never slow down ``ma-submit --help``. Each backend module exports ``create_backend(**options)``.
A name that is known but whose module is not installed raises
:class:`~malaunch.sdk.errors.BackendNotAvailable` (exit code 2), never a fake backend.

What the loader and the CLI need to know about a backend without loading it lives beside the backend, in
``<module>.options`` (optional): ``prepare_options(fields, path, resolve)`` reads its job-file section
(:func:`options_hook`), ``owns_id(job_id)`` recognises its id format (:func:`backend_for_id`).
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ..errors import BackendError, BackendNotAvailable, ConfigError
from ..spec import BACKEND_NAMES
from .base import Backend, JobHandle, make_job_id

__all__ = [
    "BACKEND_MODULES",
    "Backend",
    "JobHandle",
    "available_backends",
    "backend_for_id",
    "get_backend",
    "make_job_id",
    "options_hook",
]

OptionsHook = Callable[[Dict[str, Any], str, Callable[[Optional[object]], Optional[object]]], Dict[str, Any]]

#: Backend name -> module exporting ``create_backend``.
BACKEND_MODULES: Mapping[str, str] = {
    "local": "malaunch.sdk.backends.local",
    "modelarts": "malaunch.sdk.backends.modelarts",
    "volcano": "malaunch.sdk.backends.volcano",
}


def _module_exists(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _options_module(name: str) -> Optional[ModuleType]:
    """``<backend module>.options``, or None when the backend has none (or is not installed)."""
    module = f"{BACKEND_MODULES[name]}.options"
    try:
        found = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        return None
    return importlib.import_module(module) if found is not None else None


def options_hook(section: str) -> Optional[OptionsHook]:
    """The ``prepare_options`` of the backend whose job-file section is ``section``, or None."""
    if section not in BACKEND_MODULES:
        return None
    module = _options_module(section)
    hook = getattr(module, "prepare_options", None)
    return hook if callable(hook) else None


def backend_for_id(job_id: str) -> Optional[str]:
    """The one backend whose id format ``job_id`` has (its ``options.owns_id``), or None."""
    owners = []
    for name in BACKEND_MODULES:
        module = _options_module(name)
        owns = getattr(module, "owns_id", None)
        if callable(owns) and owns(job_id):
            owners.append(name)
    return owners[0] if len(owners) == 1 else None


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
