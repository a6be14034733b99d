"""Opening a backend: by name, as ``ma-submit`` makes it with a profile, or the one that owns a job id.

This sits above the registry (the backends' names and facts, :mod:`malaunch.sdk.backends.registry`), the backends
and the profiles, so that none of them needs the others:

- :func:`get_backend`: the backend called ``name``, made with the keyword arguments given (its folder's module is
  imported only now, so heavy client libraries never slow down ``ma-submit --help``); a name that is known but
  whose module is not installed raises :class:`~malaunch.sdk.errors.BackendNotAvailable` (exit 2);
- :func:`open_backend`: as ``ma-submit`` makes it, configured by the profile in use when the backend takes keys
  from one;
- :func:`backend_for` is the one way a job id finds its backend, for every verb of ``ma-submit``, for
  :func:`malaunch.sdk.attach` and for sweeps: the backend named, else the one this machine's job index recorded
  for the id (or for the one recorded id it is a unique prefix of), else the one whose id format it has, else
  the default; then the backend turns a unique prefix into the whole id (:meth:`Backend.resolve_id`).
  :func:`job_owner` is its first half, before any backend is made.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Dict, Mapping, Optional, Tuple

from .backends.base import Backend
from .backends.job_index import JobIndex
from .backends.registry import (
    BACKEND_MODULES,
    DEFAULT_BACKEND,
    available_backends,
    backend_for_id,
    backend_module,
    profile_keys,
    runs_here,
)
from .errors import BackendError, BackendNotAvailable, ConfigError, JobNotFound
from .profiles.arguments import backend_arguments, profile_environ
from .profiles.check import check_keys
from .profiles.store import select

# A backend's own module (and with it its client library) is imported only when that backend is opened (get_backend).

__all__ = ["backend_for", "get_backend", "job_owner", "open_backend"]


def get_backend(name: str, **options: Any) -> Backend:
    """The backend called ``name``, created with ``options`` (e.g. ``home=`` for ``local``).

    Raises:
        ConfigError: an unknown name.
        BackendNotAvailable: a known name whose module is not installed.
        BackendError: the backend's module failed to import (a missing dependency).
    """
    if name not in BACKEND_MODULES:
        raise ConfigError(f"unknown backend {name!r}", name, f"use one of: {', '.join(BACKEND_MODULES)}")
    module_name = backend_module(name)
    installed = available_backends()
    if name not in installed:
        raise BackendNotAvailable(name, ", ".join(installed))
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


def open_backend(name: str, home: Optional[str] = None, profile: Optional[str] = None) -> Backend:
    """Backend ``name`` as ``ma-submit`` makes it; ``home`` goes to a backend that keeps its jobs here. A backend
    that takes settings from a profile (its ``PROFILE_KEYS``) is configured by the profile ``profile``, else the
    one in use (``$MALAUNCH_PROFILE``, else ``default``; :mod:`malaunch.sdk.profiles`)."""
    options: Dict[str, Any] = {"home": home} if home and runs_here(name) else {}
    if not profile_keys(name):
        return get_backend(name, **options)
    chosen = select(os.environ, profile)
    if chosen is not None:
        options.update(backend_arguments(name, check_keys(chosen), os.environ))
        options["environ"] = profile_environ(os.environ, chosen.name)
    return get_backend(name, **options)


def job_owner(
    job_id: str, backend: Optional[str] = None, *, home: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
) -> Tuple[str, str]:  # fmt: skip
    """``(backend name, id)`` of ``job_id`` before its backend is asked: the first half of :func:`backend_for`.

    The backend is ``backend`` when given; else the one this machine's job index (under ``home``, else
    ``$MALAUNCH_HOME``) recorded for the id, or for the one recorded id it is a prefix of; else the one whose id
    format it has; else :data:`DEFAULT_BACKEND`. The id is the recorded one a prefix stands for, else as given.

    Raises:
        ConfigError: the prefix matches several recorded jobs.
    """
    index = JobIndex.default(os.environ if environ is None else environ, home)
    name, ident = backend, job_id
    recorded = index.backend_of(job_id)
    if recorded is None:  # perhaps a unique prefix of a recorded id (of the backend named, when one is)
        found = index.by_prefix(job_id, backend)
        if found is not None:
            ident, name = found
            if backend is None:
                _refuse_shared_prefix(job_id, found, home, environ)
    elif name is None:
        name = recorded
    if name is None:
        name = backend_for_id(job_id)
    return name or DEFAULT_BACKEND, ident


def _refuse_shared_prefix(
    prefix: str, found: Tuple[str, str], home: Optional[str], environ: Optional[Mapping[str, str]]
) -> None:
    """Raise when ``prefix``, which names the recorded job ``found`` (id, backend), also names a job of a backend
    that keeps its jobs on this machine (and so is not in the index): the user must say which one they mean."""
    for other in BACKEND_MODULES:
        if other == found[1] or not runs_here(other) or other not in available_backends():
            continue
        try:
            mine = "job " + get_backend(other, home=home, environ=environ).resolve_id(prefix)
        except JobNotFound:
            continue
        except ConfigError:  # several of its own jobs start with it
            mine = "several jobs"
        raise ConfigError(
            f"job id prefix {prefix!r} matches job {found[0]} ({found[1]}) and {mine} ({other})",
            prefix,
            f"give more of the id, or --backend {found[1]} / --backend {other}",
        )


def backend_for(
    job_id: str, backend: Optional[str] = None, *, home: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None, **options: Any,
) -> Tuple[Backend, str]:  # fmt: skip
    """The backend that owns ``job_id`` and the job's whole id (``job_id`` may be a unique prefix).

    The backend is found by :func:`job_owner`, created with ``options`` (default: as :func:`open_backend` makes
    it, with ``home``), and then resolves the id itself (:meth:`Backend.resolve_id`: a prefix of one of its jobs).

    Raises:
        ConfigError: the prefix matches several jobs; the backend is unknown.
        JobNotFound: the backend has no such job (where it can tell without asking for the job itself).
    """
    name, ident = job_owner(job_id, backend, home=home, environ=environ)
    impl = get_backend(name, **options) if options else open_backend(name, home)
    return impl, impl.resolve_id(ident)
