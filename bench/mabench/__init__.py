"""The benchmark harness behind ``python bench/run.py``: one module per case, plus process and report helpers.

Cases: ``startup`` (:mod:`.startup`), ``teardown`` (:mod:`.teardown`), ``log-throughput`` (:mod:`.lograte`),
``ranktable-scale`` (:mod:`.scale`), ``local-backend`` (:mod:`.localjob`), ``obs-upload`` (:mod:`.obsupload`),
``coordinator`` (:mod:`.coordinator`). Each case returns :class:`~mabench.results.CaseResult`; :mod:`.report`
turns them into the console table, ``docs/performance.md`` (the coordinator's figures in a section of their own)
and the SVG plot (:mod:`.svg`).
"""

from __future__ import annotations

__all__: list[str] = []
