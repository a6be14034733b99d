"""Named profiles: what a user would otherwise type for every job (backend, image, a bucket, a cluster, keys).

``ma-submit configure`` writes them (:mod:`malaunch.sdk.cli.configure`); ``--profile NAME`` or
``$MALAUNCH_PROFILE`` picks one, else the profile ``default``. Four modules, imported by name (this package
imports none of them, so a backend that declares its keys with :mod:`.keys` loads nothing else):

- :mod:`.store`: the one private file, reading and writing it, which profile is in use;
- :mod:`.keys`: what a key is, and the keys every backend shares (each backend declares its own);
- :mod:`.check`: every key a profile may hold, and the profile in use with its keys checked (all that the verbs
  without a job file need);
- :mod:`.apply`: what a profile does to a job file and to a backend, and where each value came from.
"""

from __future__ import annotations

from typing import List

__all__: List[str] = []
