"""Sweeps: one job as many trials (a grid, or seeded random samples) on any backend, ranked by an objective.

The flow, one module each: :mod:`.spec` (the ``sweep:`` section and ``--param`` -> trials, pure) ->
:mod:`.api` (``Sweep``, ``SweepHandle``: plan, record, submit) -> :mod:`.run` (the driver: one step starts
trials as slots free, reads objectives, stops) over :mod:`.state` (the record on disk, under the SDK's home) ->
:mod:`.results` (the ranked table) and :mod:`.logs` (every trial's output).

The names below are imported on first use, so that the job spec's loader can use :mod:`.spec` (the variables a
trial reserves) without loading the sweep machinery (which needs the loader).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import (
        Sweep,
        SweepHandle,
        SweepPlan,
        TrialResult,
        attach_sweep,
        default_parallel,
        list_sweeps,
        rank_results,
    )

__all__ = [
    "Sweep",
    "SweepHandle",
    "SweepPlan",
    "TrialResult",
    "attach_sweep",
    "default_parallel",
    "list_sweeps",
    "rank_results",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(".api", __name__), name)
