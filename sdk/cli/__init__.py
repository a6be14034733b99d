"""``ma-submit``, one module per verb group: parse, call the SDK, print.

- :mod:`.app`: the command group (a job file is an implicit ``submit``; the one place exit codes are decided),
  ``submit`` and :func:`main`, the console script;
- :mod:`.jobs`: the management verbs (status, logs, stop, wait, list, delete, prune) and the helpers every
  group shares (``--backend``, finding a job's backend, notes and JSON output);
- :mod:`.inside`: events, top, exec;
- :mod:`.sweep`: ``ma-submit sweep`` and its verbs.
"""

from __future__ import annotations

from .app import EXIT_INTERRUPTED, VERBS, MaSubmitGroup, cli, json_output_requested, main

__all__ = ["EXIT_INTERRUPTED", "VERBS", "MaSubmitGroup", "cli", "json_output_requested", "main"]
