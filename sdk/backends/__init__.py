"""Backends that run a job: ``local`` (default), ``modelarts`` and ``volcano``, one folder each.

- :mod:`.registry`: the one list of backends and the facts each declares (at the bottom of the SDK: it imports
  no backend, spec or profile); opening one is :mod:`malaunch.sdk.opening` (``get_backend(name)``,
  ``backend_for(job_id)``, the one way a job id finds its backend);
- :mod:`.base`: the ``Backend`` interface every backend implements and the ``JobHandle`` a job is driven by;
- what every backend shares: :mod:`.inside` (events, usage, exec results), :mod:`.job_index` (job id -> backend
  on this machine), :mod:`.codefiles` and :mod:`.ignorefile` (the code a job takes), :mod:`.logtail` and
  :mod:`.filewatch` (following log files, woken by inotify), :mod:`._http` (the one retry policy);
- ``local/``, ``modelarts/``, ``volcano/``: each backend, with its own options and id format in ``options.py``.

The names below are the registry's. A backend's own job-file section (``VolcanoOptions``, ``ModelArtsOptions``)
is imported from its facts module (``<backend>/options.py``), not from here: a verb that reads a local job (``list``,
``status``) then loads no cloud backend's section, and a new backend needs no name here (``JobSpec`` holds the
sections by name, as the registry has them).
This package's ``__init__`` is in the SDK's lowest layer, with the registry: it names nothing above it
(``tests/sdk/core/test_sdk_layering.py``).
"""

from __future__ import annotations

from .registry import (
    BACKEND_MODULES,
    BACKEND_NAMES,
    DEFAULT_BACKEND,
    available_backends,
    backend_for_id,
    new_section,
    option_sections,
    options_hook,
    runs_here,
)

__all__ = [
    "BACKEND_MODULES",
    "BACKEND_NAMES",
    "DEFAULT_BACKEND",
    "available_backends",
    "backend_for_id",
    "new_section",
    "option_sections",
    "options_hook",
    "runs_here",
]
