"""What the CLI and the loader ask the ModelArts backend without loading it: its id format, its ``modelarts:``
section (dataclass, keys, how it is read).

A ModelArts job's id in malaunch is its name, the id the plan shows (``<name>-<YYYYmmdd-HHMMSS>-<token>``);
every verb also takes the platform's own id, a UUID. :func:`owns_id` recognises the UUID, so an id copied from
the ModelArts console finds the backend without ``--backend``.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ...errors import SpecError
from ...spec.model import ModelArtsOptions

__all__ = ["KEYS", "OPTIONAL", "OPTIONS", "PLATFORM_ID", "owns_id", "prepare_options"]

#: The ``modelarts:`` section's dataclass (``JobSpec.modelarts``), and the keys a job file may give in it.
OPTIONS = ModelArtsOptions
KEYS: Tuple[str, ...] = ("obs_dir", "engine_name", "engine_version", "ssh", "job_retry_num", "job_unconditional_retry")
#: ``JobSpec.modelarts`` is None when the job file has no ``modelarts:`` section.
OPTIONAL = True

#: The platform's own job ids (``metadata.id``) are UUIDs.
PLATFORM_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")


def owns_id(job_id: str) -> bool:
    """Whether ``job_id`` is a ModelArts platform id (a UUID)."""
    return PLATFORM_ID.match(job_id) is not None


def prepare_options(
    fields: Dict[str, Any], path: str, resolve: Callable[[Optional[object]], Optional[object]]
) -> Dict[str, Any]:
    """The ``modelarts:`` mapping's fields ready for ``ModelArtsOptions(**fields)``: ``ssh: {key_pair_names:
    [...]}`` (the platform's SSH endpoint, ``ma-submit exec``) becomes ``ssh_key_pair_names``."""
    del resolve  # no paths in this section
    out = dict(fields)
    if "job_unconditional_retry" in out and out["job_unconditional_retry"] is None:
        del out["job_unconditional_retry"]  # null: the default (false)
    ssh = out.pop("ssh", None)
    if ssh is None:
        return out
    if not isinstance(ssh, Mapping) or set(ssh) - {"key_pair_names"}:
        raise SpecError(f"{path}.ssh", "must be a mapping with key_pair_names", ssh,
                        "e.g. ssh: {key_pair_names: [my-key-pair]}")  # fmt: skip
    names = ssh.get("key_pair_names") or []
    if not isinstance(names, (list, tuple)) or not all(isinstance(name, str) for name in names):
        raise SpecError(f"{path}.ssh.key_pair_names", "must be a list of key-pair names", names)
    out["ssh_key_pair_names"] = tuple(names)
    return out
