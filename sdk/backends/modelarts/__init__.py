"""The ModelArts backend: training-job API v2 with AK/SK signing, code uploaded to OBS with boto3.

Modules: :mod:`.request` (spec -> create body, pure), :mod:`.signer` (``SDK-HMAC-SHA256``),
:mod:`.credentials` (AK/SK, project, region, endpoints), :mod:`.api` (the v2 client over a
``requests.Session``), :mod:`.obs` (uploads), :mod:`.phases` (phases -> ``JobState``), :mod:`.backend`.
See ``docs/modelarts.md``.
"""

from __future__ import annotations

from .backend import ModelArtsBackend, create_backend

__all__ = ["ModelArtsBackend", "create_backend"]
