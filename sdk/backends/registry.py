"""The one registry of backends: their names, where each lives, and which backend owns a job id.

Every backend is a folder of this package with a module exporting ``create_backend(**options)``, imported only
when that backend is asked for, so heavy client libraries never slow down ``ma-submit --help``. A name that is
known but whose module is not installed raises :class:`~malaunch.sdk.errors.BackendNotAvailable` (exit 2).

What the loader, the CLI and sweeps need to know about a backend without loading it lives beside the backend, in
``<backend>/options.py`` (the backend's *facts* module, light to import):

- ``OPTIONS``, ``KEYS``, ``OPTIONAL``, ``SHAPE`` and ``prepare_options(fields, path, resolve)``: the job-file
  section the backend reads (named as the backend, a ``JobSpec`` field), its dataclass (defined and checked
  there), its keys, what it must be, and how its mapping becomes that dataclass's fields; the loader and the spec
  read every section through :func:`option_sections` (and :func:`options_hook`, :func:`new_section`);
- ``owns_id(job_id)``, in ``<backend>/ids.py`` (apart, so that finding a job's backend loads no section):
  whether an id has the backend's own format (:func:`backend_for_id`);
- ``RUNS_ON_THIS_MACHINE``: the backend runs its jobs here and keeps them under the SDK's home (local), so a
  ``home`` is handed to it and a sweep's parallelism is bounded by this machine's CPUs (:func:`runs_here`).

What a malaunch profile may keep for a backend is in ``<backend>/profile.py`` (``PROFILE_KEYS``, read by
:func:`profile_keys` only when profiles are used).

:func:`backend_for` is the one way a job id finds its backend, for every verb of ``ma-submit``, for
:func:`malaunch.sdk.attach` and for sweeps: the backend named, else the one this machine's job index recorded for
the id (or for the one recorded id it is a unique prefix of), else the one whose id format it has, else the
default; then the backend turns a unique prefix into the whole id (:meth:`Backend.resolve_id`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from types import ModuleType

from malaunch.entrypoint.public import NamedTuple

from ..errors import BackendError, BackendNotAvailable, ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Mapping, Optional, Tuple, TypeAlias

    from ..profiles.keys import ProfileKey
    from .base import Backend

__all__ = [
    "BACKEND_MODULES",
    "BACKEND_NAMES",
    "DEFAULT_BACKEND",
    "available_backends",
    "backend_for",
    "backend_for_id",
    "get_backend",
    "job_owner",
    "new_section",
    "open_backend",
    "option_sections",
    "options_hook",
    "profile_keys",
    "runs_here",
]

OptionsHook: TypeAlias = (
    "Callable[[Dict[str, Any], str, Callable[[Optional[object]], Optional[object]]], Dict[str, Any]]"
)

#: Backend name -> module exporting ``create_backend``.
BACKEND_MODULES: Mapping[str, str] = {
    "local": "malaunch.sdk.backends.local",
    "modelarts": "malaunch.sdk.backends.modelarts",
    "volcano": "malaunch.sdk.backends.volcano",
}
#: Backend names a job file may use (see :func:`available_backends` for which are installed).
BACKEND_NAMES: Tuple[str, ...] = tuple(BACKEND_MODULES)
#: The backend of a job file without ``backend:`` and of a job id nothing else claims.
DEFAULT_BACKEND = "local"


def _module_exists(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


_FACTS: Dict[Tuple[str, str], Optional[ModuleType]] = {}


def _facts(name: str, kind: str = "options") -> Optional[ModuleType]:
    """``<backend module>.<kind>``, or None when the backend has none (or is not installed); looked up once."""
    if (name, kind) not in _FACTS:
        module = f"{BACKEND_MODULES[name]}.{kind}"
        try:
            found = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            found = None
        _FACTS[name, kind] = importlib.import_module(module) if found is not None else None
    return _FACTS[name, kind]


def options_hook(section: str) -> Optional[OptionsHook]:
    """The ``prepare_options`` of the backend whose job-file section is ``section``, or None."""
    if section not in BACKEND_MODULES:
        return None
    hook = getattr(_facts(section), "prepare_options", None)
    return hook if callable(hook) else None


class Section(NamedTuple):
    """A backend's own job-file section: ``name:`` (the backend's name) holding ``options`` (the backend's
    dataclass, the type of the ``JobSpec`` field of that name) with the keys ``keys``; ``optional``: the field is
    None when the job file has no such section (else the dataclass's defaults); ``shape``: what the section must
    be, for the error when it is something else."""

    name: str
    options: type
    keys: Tuple[str, ...]
    optional: bool
    shape: str


@functools.cache
def option_sections(order: Tuple[str, ...] = ()) -> Tuple[Section, ...]:
    """Every backend's own job-file section, those named in ``order`` first, in that order (asked for every
    ``JobSpec`` made, so each answer is kept)."""
    from dataclasses import is_dataclass  # a section is a dataclass; only the spec asks for the sections

    found = []
    for name in BACKEND_MODULES:
        facts = _facts(name)
        options = getattr(facts, "OPTIONS", None)
        if facts is not None and isinstance(options, type) and is_dataclass(options):
            optional = bool(getattr(facts, "OPTIONAL", False))
            shape = str(getattr(facts, "SHAPE", f"a mapping of {name} options"))
            found.append(Section(name, options, tuple(facts.KEYS), optional, shape))
    rank = {name: position for position, name in enumerate(order)}
    return tuple(sorted(found, key=lambda section: rank.get(section.name, len(rank))))


def new_section(name: str) -> Any:
    """Backend ``name``'s section with its defaults (what ``JobSpec`` holds when the job file has none).

    Raises:
        TypeError: the backend declares no section.
    """
    for section in option_sections():
        if section.name == name:
            return section.options()
    raise TypeError(f"backend {name!r} declares no job-file section")


def runs_here(name: str) -> bool:
    """Whether backend ``name`` runs its jobs on this machine, under the SDK's home (its ``RUNS_ON_THIS_MACHINE``)."""
    return name in BACKEND_MODULES and bool(getattr(_facts(name), "RUNS_ON_THIS_MACHINE", False))


def profile_keys(name: str) -> Tuple[ProfileKey, ...]:
    """The profile keys backend ``name`` declares (``PROFILE_KEYS`` of its module ``<backend>.profile``, apart
    from its facts so that they stay light; written ``<name>.<key>`` in a profile), or ()."""
    if name not in BACKEND_MODULES:
        return ()
    module = f"{BACKEND_MODULES[name]}.profile"
    try:
        found = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        return ()
    return tuple(getattr(importlib.import_module(module), "PROFILE_KEYS", ())) if found is not None else ()


def backend_for_id(job_id: str) -> Optional[str]:
    """The one backend whose id format ``job_id`` has (its ``ids.owns_id``), or None."""
    owners = []
    for name in BACKEND_MODULES:
        owns = getattr(_facts(name, "ids"), "owns_id", None)
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
        BackendNotAvailable: a known name whose module is not installed.
        BackendError: the backend's module failed to import (a missing dependency).
    """
    from .base import Backend

    if name not in BACKEND_MODULES:
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


def open_backend(name: str, home: Optional[str] = None, profile: Optional[str] = None) -> Backend:
    """Backend ``name`` as ``ma-submit`` makes it; ``home`` goes to a backend that keeps its jobs here. A backend
    that takes settings from a profile (its ``PROFILE_KEYS``) is configured by the profile ``profile``, else the
    one in use (``$MALAUNCH_PROFILE``, else ``default``; :mod:`malaunch.sdk.profiles`)."""
    options: Dict[str, Any] = {"home": home} if home and runs_here(name) else {}
    if not profile_keys(name):
        return get_backend(name, **options)
    from ..profiles.store import select  # the profile file is read only for a backend that takes from it

    chosen = select(os.environ, profile)
    if chosen is not None:
        from ..profiles.arguments import backend_arguments, profile_environ  # only when a profile is in use
        from ..profiles.check import check_keys

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
    from .job_index import JobIndex  # only a verb given a job id reads the index (not --help)

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
    from ..errors import JobNotFound

    for other in BACKEND_MODULES:
        if other == found[1] or not runs_here(other) or not _module_exists(BACKEND_MODULES[other]):
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
