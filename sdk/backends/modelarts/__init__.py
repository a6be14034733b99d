"""The ModelArts backend: training-job API v2 with AK/SK signing, code uploaded to OBS with boto3.

Modules: :mod:`.request` (spec -> create body, pure), :mod:`.signer` (``SDK-HMAC-SHA256``),
:mod:`.credentials` (AK/SK, project, region, endpoints), :mod:`.api` (the v2 client over a
``requests.Session``), :mod:`.obs` (uploads), :mod:`.phases` (phases -> ``JobState``), :mod:`.backend`,
:mod:`.options` (its job-file section), :mod:`.ids` (the id format the CLI asks about). See ``docs/modelarts.md``.

The names below are imported on first use, so asking :mod:`.options` costs no client import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import ModelArtsBackend, create_backend


def __getattr__(name: str) -> Any:
    if name not in ("ModelArtsBackend", "create_backend"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(".backend", __name__), name)


__all__ = ["ModelArtsBackend", "create_backend"]
