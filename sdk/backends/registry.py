"""The one registry of backends, at the bottom of the SDK: their names, where each lives, and facts about each.

Every backend is a folder of this package whose module ``backend`` exports ``create_backend(**options)``
(:func:`backend_module`), imported only when that backend is opened (:mod:`malaunch.sdk.opening`, above the
backends and the profiles), so heavy client libraries never slow down ``ma-submit --help``. This module imports
no backend's code, no spec and no profile: it names the folders (:data:`BACKEND_MODULES`, the one line a new
backend adds) and reads their light facts modules on first use.

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

:func:`backend_for_id` is the part of finding a job's backend that needs only these facts; the whole way
(the job index, then the id's format, then the default) is :func:`malaunch.sdk.opening.backend_for`.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, NamedTuple, Optional, Tuple, TypeAlias

if TYPE_CHECKING:
    from ..profiles.keys import ProfileKey

__all__ = [
    "BACKEND_MODULES",
    "BACKEND_NAMES",
    "DEFAULT_BACKEND",
    "available_backends",
    "backend_for_id",
    "backend_module",
    "new_section",
    "option_sections",
    "options_hook",
    "profile_keys",
    "runs_here",
]

OptionsHook: TypeAlias = (
    "Callable[[Dict[str, Any], str, Callable[[Optional[object]], Optional[object]]], Dict[str, Any]]"
)

#: Backend name -> its folder (a package; its module ``backend`` exports ``create_backend``).
BACKEND_MODULES: Mapping[str, str] = {
    "local": "malaunch.sdk.backends.local",
    "modelarts": "malaunch.sdk.backends.modelarts",
    "volcano": "malaunch.sdk.backends.volcano",
}
#: Backend names a job file may use (see :func:`available_backends` for which are installed).
BACKEND_NAMES: Tuple[str, ...] = tuple(BACKEND_MODULES)
#: The backend of a job file without ``backend:`` and of a job id nothing else claims.
DEFAULT_BACKEND = "local"


def backend_module(name: str) -> str:
    """The module of backend ``name`` that exports ``create_backend``: ``backend`` in its folder (the folder's own
    ``__init__`` imports nothing, so that reading the backend's facts loads none of its implementation)."""
    return f"{BACKEND_MODULES[name]}.backend"


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
