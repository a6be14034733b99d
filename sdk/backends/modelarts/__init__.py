"""The ModelArts backend: training-job API v2 with AK/SK signing, code uploaded to OBS with boto3.

Modules: :mod:`.request` (spec -> create body, pure), :mod:`.signer` (``SDK-HMAC-SHA256``),
:mod:`.credentials` (AK/SK, project, region, endpoints), :mod:`.api` (the v2 client over a
``requests.Session``), :mod:`.obs` (uploads), :mod:`.phases` (phases -> ``JobState``), :mod:`.backend`,
:mod:`.options` (its job-file section), :mod:`.ids` (the id format the CLI asks about). See ``docs/modelarts.md``.

The package itself imports nothing: asking :mod:`.options` (the registry's facts) loads no other module of it, and
the opener (:mod:`malaunch.sdk.opening`) imports :mod:`.backend` when the backend is opened.
"""

from __future__ import annotations

__all__: list[str] = []
