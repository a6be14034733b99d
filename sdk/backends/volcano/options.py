"""What the loader and the CLI ask the Volcano backend: how its ``volcano:`` section is read, and its id format.

Kept apart from :mod:`.backend` so that asking costs no client import. The section's dataclass,
:class:`~malaunch.sdk.spec.VolcanoOptions`, stays in :mod:`malaunch.sdk.spec` because ``JobSpec`` holds it.

- :data:`OPTIONS`, :data:`KEYS` and :data:`OPTIONAL` declare the section to the loader (through the registry);
- :func:`prepare_options` turns the job file's ``volcano:`` mapping into ``VolcanoOptions`` keyword arguments
  (``null`` means the default, exit codes as a tuple, a template path relative to the job file);
- :func:`owns_id` says whether a job id has this backend's format, ``<namespace>/<name>`` (no other backend's
  ids have a ``/``), so ``ma-submit status ml/train-...`` finds the cluster without ``--backend``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Dict, Optional, Tuple

from ...errors import SpecError
from ...spec.model import VolcanoOptions

__all__ = ["ID_FORMAT", "KEYS", "OPTIONAL", "OPTIONS", "SECTION", "owns_id", "prepare_options"]

#: The job file's section these options come from.
SECTION = "volcano"
#: The section's dataclass (``JobSpec.volcano``) and the keys a job file may give in it: its fields.
OPTIONS = VolcanoOptions
KEYS: Tuple[str, ...] = tuple(field.name for field in dataclasses.fields(VolcanoOptions))
#: ``JobSpec.volcano`` always holds options: the defaults when the job file has no ``volcano:`` section.
OPTIONAL = False
#: ``<namespace>/<name>``: a Kubernetes namespace, then a Volcano Job name.
ID_FORMAT = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z]([-a-z0-9]*[a-z0-9])?\Z")
_DEFAULT_WHEN_NULL = (
    "queue",
    "code_path",
    "max_retry",
    "on_pod_failure",
    "on_pod_eviction",
    "not_retryable_exit_codes",
)


def owns_id(job_id: str) -> bool:
    """Whether ``job_id`` has the Volcano backend's format (``<namespace>/<name>``)."""
    return ID_FORMAT.match(job_id) is not None


def prepare_options(
    fields: Dict[str, Any], path: str, resolve: Callable[[Optional[object]], Optional[object]]
) -> Dict[str, Any]:
    """The ``volcano:`` mapping's fields ready for ``VolcanoOptions(**fields)``; ``resolve`` makes a path
    relative to the job file absolute.

    Raises:
        SpecError: ``not_retryable_exit_codes`` is not a list.
    """
    out = {key: value for key, value in fields.items() if not (key in _DEFAULT_WHEN_NULL and value is None)}
    key = "not_retryable_exit_codes"
    if key in out:
        if not isinstance(out[key], (list, tuple)):
            raise SpecError(f"{path}.{key}", "must be a list of exit codes (1-255)", out[key])
        out[key] = tuple(out[key])
    if "template" in out:
        out["template"] = resolve(out["template"])
    return out
