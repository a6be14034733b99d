"""Layer 1, the plan: rank tables, the inputs gathered before planning, and the frozen ``LaunchPlan``.

Imports only :mod:`..contract` (and the standard library).
"""

__all__: list[str] = []
