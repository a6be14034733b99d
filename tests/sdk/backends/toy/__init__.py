"""A backend of the tests, whole in this folder: it "runs" a job by recording it in a folder of the SDK's home.

It proves that a new backend is its folder plus one line in the registry (``docs/sdk.md#adding-a-backend``):

- :data:`LINE` is that line (name -> module); the tests add it to ``BACKEND_MODULES`` for their duration
  (``monkeypatch.setitem``), and :mod:`.cli` adds it before ``ma-submit`` runs in a process of its own;
- ``options.py``: its own job-file section, ``toy: {steps: N}`` (the lines each host writes), with its defaults,
  its check and its piece of the JSON schema; that it runs its jobs on this machine (it is handed the home);
- ``ids.py``: its ids' format (``toy-...``); ``backend.py``: :class:`~.backend.ToyBackend` and ``create_backend``
  (what the registry opens, as for every backend: the folder's module ``backend``);
- ``harness.py``: how the conformance suite (``tests/sdk/backends/test_backend_conformance.py``) drives it.

A job's outcome is its variable ``MALAUNCH_TEST_SCENARIO``, as with the fake services: an exit code (``0``, ``7``),
or ``run`` (it runs until stopped).
"""

from __future__ import annotations

from typing import Tuple

__all__ = ["LINE"]

#: The one line of the registry (``BACKEND_MODULES``) that makes this folder a backend.
LINE: Tuple[str, str] = ("toy", __name__)
