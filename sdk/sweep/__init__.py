"""Sweeps: one job as many trials (a grid, or seeded random samples) on any backend, ranked by an objective.

The flow, one module each: :mod:`.spec` (the ``sweep:`` section and ``--param`` -> trials, pure) ->
:mod:`.api` (``Sweep``, ``SweepHandle``: plan, record, submit) -> :mod:`.run` (the driver: one step starts
trials as slots free, reads objectives, stops) over :mod:`.state` (the record on disk, under the SDK's home) ->
:mod:`.results` (the ranked table) and :mod:`.logs` (every trial's output).

The package's names are :mod:`.api`'s (its ``__all__`` is the one list of them).
"""

from __future__ import annotations

from . import api
from .api import *  # noqa: F403

__all__: list[str] = []
__all__ += api.__all__
