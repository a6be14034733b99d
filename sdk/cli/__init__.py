"""``ma-submit``, one module per verb group: parse, call the SDK, print.

- :mod:`.app`: the command group (a job file is an implicit ``submit``; the one place exit codes are decided)
  and :func:`main`, the console script;
- :mod:`.verbs`: every verb's name, module and short help; a verb's module is imported only when it runs or its
  help is asked (``ma-submit --help`` loads none);
- :mod:`.submit`: ``submit``;
- :mod:`.jobs`: the management verbs (status, logs, stop, wait, list, delete, prune) and the helpers every
  group shares (``--backend``, finding a job's backend); :mod:`.output`: notes, JSON output, ``--output``;
- :mod:`.inside`: events, top, exec;
- :mod:`.sweep`: ``ma-submit sweep`` and its verbs.
"""

from __future__ import annotations

from .app import EXIT_INTERRUPTED, VERBS, MaSubmitGroup, cli, json_output_requested, main

__all__ = ["EXIT_INTERRUPTED", "VERBS", "MaSubmitGroup", "cli", "json_output_requested", "main"]
