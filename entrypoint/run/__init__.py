"""Layer 3, the run: start a plan's processes, route their output, watch, end them, and the attempt loop.

Method-agnostic: what differs per method comes in through the :class:`.launcher.Launcher` hooks. Imports only
:mod:`..report`, :mod:`..plan` and :mod:`..contract`.
"""

__all__: list[str] = []
