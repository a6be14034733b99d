"""Layer 2, the report: facts about deaths, the root cause decided from them, failure classes, report.json.

Pure functions over recorded facts; imports only :mod:`..plan` and :mod:`..contract`.
"""

__all__: list[str] = []
