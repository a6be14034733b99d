"""``ma-submit``, one module per verb group: parse, call the SDK, print.

- :mod:`.entry`: :func:`main`, what the console script calls;
- :mod:`.app`: the command group (a job file is an implicit ``submit``; options before the verb go after it) and
  the one place its outcome becomes an exit code;
- :mod:`.verbs`: every verb's name, module and short help: the group is a lazy group, which imports a verb's module
  only when that verb runs or its help is asked (``ma-submit --help`` loads none);
- :mod:`.submit`: ``submit``'s definition (options, help), and :mod:`.submitting` its work, which the table names
  apart so that ``submit --help`` loads no job API;
- :mod:`.jobs`: the management verbs (status, logs, stop, wait, list, delete, prune) as click commands, and the
  helpers every group shares (``--backend``, finding a job's backend); what each verb does is in :mod:`.actions`;
- :mod:`.echo` (printing), :mod:`.exits` (the one place exit codes are decided), free of click, and
  :mod:`.output` (the ``--output`` choice);
- :mod:`.inside`: events, top, exec;
- :mod:`.sweep`: ``ma-submit sweep`` and its verbs;
- :mod:`.configure`: profiles (``configure``).
"""

from __future__ import annotations

from .app import EXIT_INTERRUPTED, VERBS, MaSubmitGroup, cli, json_output_requested
from .entry import main

__all__ = ["EXIT_INTERRUPTED", "VERBS", "MaSubmitGroup", "cli", "json_output_requested", "main"]
