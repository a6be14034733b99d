"""The toy backend's ids: ``toy-<name>-<YYYYmmdd-HHMMSS>-<token>``."""

from __future__ import annotations

__all__ = ["PREFIX", "owns_id"]

PREFIX = "toy-"


def owns_id(job_id: str) -> bool:
    """Whether ``job_id`` has the toy's format."""
    return job_id.startswith(PREFIX)
