"""The one registry of backends, at the bottom of the SDK: their names, where each lives, and facts about each.

Every backend is a folder of this package whose module ``backend`` exports ``create_backend(**options)``
(:func:`backend_module`), imported only when that backend is opened (:mod:`malaunch.sdk.opening`, above the
backends and the profiles), so heavy client libraries never slow down ``ma-submit --help``. This module imports
no backend's code, no spec and no profile: it names the folders (:data:`BACKEND_MODULES`, the one line a new
backend adds) and reads their light facts modules on first use.

What the loader, the CLI and sweeps need to know about a backend without loading it lives beside the backend, in
``<backend>/options.py`` (the backend's *facts* module, light to import):

- ``OPTIONS``, ``KEYS``, ``OPTIONAL``, ``SHAPE``, ``SCHEMA`` and ``prepare_options(fields, path, resolve)``: the
  job-file section the backend reads (named as the backend, held in ``JobSpec.sections`` and read as
  ``spec.<name>``), its dataclass (defined and checked there), its keys, what it must be, its piece of the job
  file's JSON schema, and how its mapping becomes that dataclass's fields; the loader and the spec read every
  section through :func:`option_sections` (and :func:`options_hook`, :func:`new_section`);
- ``owns_id(job_id)``, in ``<backend>/ids.py`` (apart, so that finding a job's backend loads no section):
  whether an id has the backend's own format (:func:`backend_for_id`);
- ``RUNS_ON_THIS_MACHINE``: the backend runs its jobs here and keeps them under the SDK's home (local), so a
  ``home`` is handed to it and a sweep's parallelism is bounded by this machine's CPUs (:func:`runs_here`).

What a malaunch profile may keep for a backend is in ``<backend>/profile.py`` (``PROFILE_KEYS``, read by
:func:`profile_keys` only when profiles are used).

:func:`backend_for_id` is the part of finding a job's backend that needs only these facts; the whole way
(the job index, then the id's format, then the default) is :func:`malaunch.sdk.opening.backend_for`.

Everything here is read from :data:`BACKEND_MODULES` when asked (:data:`BACKEND_NAMES` is a view of its keys, and
what is kept is kept per its contents), so a line added to it (a test's backend, for the test's duration) is seen
by the spec, the loader and the CLI alike.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from dataclasses import is_dataclass
from types import ModuleType
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterator,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    TypeAlias,
    overload,
)

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
    "section_types",
]

OptionsHook: TypeAlias = (
    "Callable[[Dict[str, Any], str, Callable[[Optional[object]], Optional[object]]], Dict[str, Any]]"
)

#: Backend name -> its folder (a package; its module ``backend`` exports ``create_backend``): the one line each
#: backend adds.
BACKEND_MODULES: Dict[str, str] = {
    "local": "malaunch.sdk.backends.local",
    "modelarts": "malaunch.sdk.backends.modelarts",
    "volcano": "malaunch.sdk.backends.volcano",
}


class _Names(Sequence[str]):
    """The names of :data:`BACKEND_MODULES`, in its order, as they are when asked (a sequence for ``click.Choice``)."""

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: Any) -> Any:
        return tuple(BACKEND_MODULES)[index]

    def __len__(self) -> int:
        return len(BACKEND_MODULES)

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(BACKEND_MODULES))

    def __contains__(self, name: object) -> bool:
        return name in BACKEND_MODULES

    def __repr__(self) -> str:
        return repr(tuple(BACKEND_MODULES))


#: Backend names a job file may use (see :func:`available_backends` for which are installed).
BACKEND_NAMES: Sequence[str] = _Names()
#: The backend of a job file without ``backend:`` and of a job id nothing else claims.
DEFAULT_BACKEND = "local"


def backend_module(name: str) -> str:
    """The module of backend ``name`` that exports ``create_backend``: ``backend`` in its folder (the folder's own
    ``__init__`` imports nothing, so that reading the backend's facts loads none of its implementation)."""
    return f"{BACKEND_MODULES[name]}.backend"


def _module_exists(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


_FACTS: Dict[str, Optional[ModuleType]] = {}


def _facts(name: str, kind: str = "options") -> Optional[ModuleType]:
    """``<backend module>.<kind>``, or None when the backend has none (or is not installed); looked up once."""
    module = f"{BACKEND_MODULES[name]}.{kind}"
    if module not in _FACTS:
        try:
            found = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            found = None
        _FACTS[module] = importlib.import_module(module) if found is not None else None
    return _FACTS[module]


def options_hook(section: str) -> Optional[OptionsHook]:
    """The ``prepare_options`` of the backend whose job-file section is ``section``, or None."""
    if section not in BACKEND_MODULES:
        return None
    hook = getattr(_facts(section), "prepare_options", None)
    return hook if callable(hook) else None


class Section(NamedTuple):
    """A backend's own job-file section: ``name:`` (the backend's name) holding ``options`` (the backend's
    dataclass, held in ``JobSpec.sections[name]`` and read as ``spec.<name>``) with the keys ``keys``;
    ``optional``: it is None when the job file has no such section (else the dataclass's defaults); ``shape``: what
    the section must be, for the error when it is something else; ``schema``: its piece of the job file's JSON
    schema (the value of ``properties.<name>``, with ``$defs`` of its own if it needs some)."""

    name: str
    options: type
    keys: Tuple[str, ...]
    optional: bool
    shape: str
    schema: Mapping[str, Any]


def option_sections() -> Tuple[Section, ...]:
    """Every backend's own job-file section: those every spec holds (not optional) first, each group in the
    registry's order (the order of a spec's data, of a job file's keys in messages and of the schema's properties).
    Asked for every ``JobSpec`` made, so the answer is kept for each content of the registry."""
    return _sections(tuple(BACKEND_MODULES.items()))


@functools.cache
def _sections(registry: Tuple[Tuple[str, str], ...]) -> Tuple[Section, ...]:
    found = []
    for name, _ in registry:
        facts = _facts(name)
        options = getattr(facts, "OPTIONS", None)
        if facts is not None and isinstance(options, type) and is_dataclass(options):
            optional = bool(getattr(facts, "OPTIONAL", False))
            shape = str(getattr(facts, "SHAPE", f"a mapping of {name} options"))
            schema = getattr(facts, "SCHEMA", {"type": "object"})
            found.append(Section(name, options, tuple(facts.KEYS), optional, shape, schema))
    return tuple(sorted(found, key=lambda section: section.optional))


def section_types() -> Mapping[str, type]:
    """Section name (the backend's name) -> the backend's section type, for every backend that declares one."""
    return {section.name: section.options for section in option_sections()}


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
