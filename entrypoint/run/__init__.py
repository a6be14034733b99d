"""Layer 3, the run: start a plan's processes, route their output, watch, end them, and the attempt loop.

Method-agnostic: what differs per method comes in through the :class:`.launcher.Launcher` hooks. Imports only
:mod:`..report`, :mod:`..plan` and :mod:`..contract`. Two rooms stand apart and never import each other:
:mod:`.output` (log files and the console) and :mod:`.procs` (the processes and their ownership); the supervisor,
the attempt loop (:mod:`.attempts`, :mod:`.hosts` on several hosts) and hang detection use both.
"""

__all__: list[str] = []
