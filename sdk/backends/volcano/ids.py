"""The Volcano backend's job ids, ``<namespace>/<name>``, asked by the registry without loading the rest.

No other backend's ids have a ``/``, so ``ma-submit status ml/train-...`` finds the cluster without
``--backend`` (:func:`malaunch.sdk.backends.backend_for_id`).
"""

from __future__ import annotations

import re

__all__ = ["ID_FORMAT", "owns_id"]

#: ``<namespace>/<name>``: a Kubernetes namespace, then a Volcano Job name.
ID_FORMAT = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z]([-a-z0-9]*[a-z0-9])?\Z")


def owns_id(job_id: str) -> bool:
    """Whether ``job_id`` has the Volcano backend's format (``<namespace>/<name>``)."""
    return ID_FORMAT.match(job_id) is not None
