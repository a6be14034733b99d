"""The Volcano backend: the same job file as a ``batch.volcano.sh/v1alpha1`` Job on a Kubernetes cluster.

Modules: :mod:`.backend` (``VolcanoBackend``, the ``Backend`` implementation), :mod:`.manifest` (pure spec ->
manifest rendering), :mod:`.template` (the adaptable manifest template and its placeholders), :mod:`.phases`
(Volcano phases and pods -> states, hosts, exit code), :mod:`.client` (the ``kubernetes`` client, imported
lazily), :mod:`.logs` (pod logs as ``[host N]`` lines), :mod:`.options` and :mod:`.ids` (what the loader and
the CLI ask without loading the rest). ``docs/volcano.md`` is the user guide.

The names below are imported on first use, so asking :mod:`.options` costs no client import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import VolcanoBackend, create_backend, split_job_id, volcano_job_name
    from .manifest import render_manifest
    from .phases import PHASES, job_state

_HOMES = {
    "PHASES": ".phases",
    "VolcanoBackend": ".backend",
    "create_backend": ".backend",
    "job_state": ".phases",
    "render_manifest": ".manifest",
    "split_job_id": ".backend",
    "volcano_job_name": ".backend",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name], __name__), name)


__all__ = [
    "PHASES",
    "VolcanoBackend",
    "create_backend",
    "job_state",
    "render_manifest",
    "split_job_id",
    "volcano_job_name",
]
