"""The Volcano backend: the same job file as a ``batch.volcano.sh/v1alpha1`` Job on a Kubernetes cluster.

Modules: :mod:`.backend` (``VolcanoBackend``, the ``Backend`` implementation), :mod:`.manifest` (pure spec ->
manifest rendering), :mod:`.template` (the adaptable manifest template and its placeholders), :mod:`.phases`
(Volcano phases and pods -> states, hosts, exit code), :mod:`.client` (the ``kubernetes`` client, imported
lazily), :mod:`.logs` (pod logs as ``[host N]`` lines). ``docs/volcano.md`` is the user guide.
"""

from __future__ import annotations

from .backend import VolcanoBackend, create_backend, split_job_id, volcano_job_name
from .manifest import render_manifest
from .phases import PHASES, job_state

__all__ = [
    "PHASES",
    "VolcanoBackend",
    "create_backend",
    "job_state",
    "render_manifest",
    "split_job_id",
    "volcano_job_name",
]
