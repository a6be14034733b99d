"""What the registry asks the local backend without loading it: it runs its jobs on this machine.

Its jobs live under the SDK's home (``$MALAUNCH_HOME/jobs/<id>/``), so ``ma-submit`` and sweeps hand it their
home, and a sweep runs at once only as many trials as this machine's CPUs hold. Its ids have no format of their
own (``<name>-<YYYYmmdd-HHMMSS>-<token>``, like a ModelArts job's name): an id nothing else claims is looked up
here.
"""

from __future__ import annotations

__all__ = ["RUNS_ON_THIS_MACHINE"]

#: Jobs run here and are kept under the SDK's home.
RUNS_ON_THIS_MACHINE = True
