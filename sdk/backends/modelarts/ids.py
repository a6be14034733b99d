"""The ModelArts backend's job ids, asked by the registry without loading the rest.

A ModelArts job's id in malaunch is its name, the id the plan shows (``<name>-<YYYYmmdd-HHMMSS>-<token>``);
every verb also takes the platform's own id, a UUID. :func:`owns_id` recognises the UUID, so an id copied from
the ModelArts console finds the backend without ``--backend``.
"""

from __future__ import annotations

import re

__all__ = ["PLATFORM_ID", "owns_id"]

#: The platform's own job ids (``metadata.id``) are UUIDs.
PLATFORM_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")


def owns_id(job_id: str) -> bool:
    """Whether ``job_id`` is a ModelArts platform id (a UUID)."""
    return PLATFORM_ID.match(job_id) is not None
