"""Backends that run a job: ``local`` (default), ``modelarts`` and ``volcano``, one folder each.

- :mod:`.registry`: the one list of backends, ``get_backend(name)``, and ``backend_for(job_id)``, the one way a
  job id finds its backend (the CLI, ``attach()`` and sweeps all use it);
- :mod:`.base`: the ``Backend`` interface every backend implements and the ``JobHandle`` a job is driven by;
- what every backend shares: :mod:`.contract` (the launcher variables a spec becomes), :mod:`.inside` (events,
  usage, exec results), :mod:`.job_index` (job id -> backend on this machine), :mod:`.codefiles` and
  :mod:`.ignorefile` (the code a job takes), :mod:`.logtail` and :mod:`.filewatch` (following log files, woken
  by inotify), :mod:`._http` (the one retry policy);
- ``local/``, ``modelarts/``, ``volcano/``: each backend, with its own options and id format in ``options.py``.

The names below are imported on first use, so that the spec can ask the registry for the backends' names without
loading the interface (which needs the spec); ``VolcanoOptions`` and ``ModelArtsOptions``, the sections the backends
declare, are named here for the types of ``JobSpec``'s fields and for :mod:`malaunch.sdk.spec`.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .base import Backend, JobHandle, make_job_id
    from .modelarts.options import ModelArtsOptions
    from .registry import (
        BACKEND_MODULES,
        BACKEND_NAMES,
        DEFAULT_BACKEND,
        available_backends,
        backend_for,
        backend_for_id,
        get_backend,
        job_owner,
        new_section,
        open_backend,
        option_sections,
        options_hook,
        runs_here,
    )
    from .volcano.options import VolcanoOptions

__all__ = [
    "BACKEND_MODULES",
    "BACKEND_NAMES",
    "DEFAULT_BACKEND",
    "Backend",
    "JobHandle",
    "ModelArtsOptions",
    "VolcanoOptions",
    "available_backends",
    "backend_for",
    "backend_for_id",
    "get_backend",
    "job_owner",
    "make_job_id",
    "new_section",
    "open_backend",
    "option_sections",
    "options_hook",
    "runs_here",
]

_HOMES = {
    **{name: ".base" for name in ("Backend", "JobHandle", "make_job_id")},
    "ModelArtsOptions": ".modelarts.options",  # the backends' own job-file sections, for JobSpec's fields
    "VolcanoOptions": ".volcano.options",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES.get(name, ".registry"), __name__), name)
