"""The Volcano backend: the same job file as a ``batch.volcano.sh/v1alpha1`` Job on a Kubernetes cluster.

Modules: :mod:`.backend` (``VolcanoBackend``, the ``Backend`` implementation), :mod:`.manifest` (pure spec ->
manifest rendering), :mod:`.template` (the adaptable manifest template and its placeholders), :mod:`.phases`
(Volcano phases and pods -> states, hosts, exit code), :mod:`.client` (the ``kubernetes`` client, imported
lazily), :mod:`.logs` (pod logs as ``[host N rank R]`` lines), :mod:`.options` and :mod:`.ids` (what the loader and
the CLI ask without loading the rest). ``docs/volcano.md`` is the user guide.

The package itself imports nothing: asking :mod:`.options` (the registry's facts) loads no other module of it, and
the opener (:mod:`malaunch.sdk.opening`) imports :mod:`.backend` when the backend is opened.
"""

from __future__ import annotations

__all__: list[str] = []
