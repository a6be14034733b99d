"""``ma-submit``, one module per verb group: parse, call the SDK, print.

- :mod:`.entry`: :func:`main`, the console script: :mod:`.quick` (the everyday verbs and the group's help, stored
  in :mod:`.help_text`, without click) or :mod:`.app`; :mod:`.width`: the help's width, shared by both;
- :mod:`.app`: the command group (a job file is an implicit ``submit``) and the click path's ``main``;
- :mod:`.verbs`: every verb's name, module and short help; a verb's module is imported only when it runs or its
  help is asked (``ma-submit --help`` loads none);
- :mod:`.submit`: ``submit``;
- :mod:`.jobs`: the management verbs (status, logs, stop, wait, list, delete, prune) as click commands, and the
  helpers every group shares (``--backend``, finding a job's backend); what each verb does is in :mod:`.actions`;
- :mod:`.echo` (printing), :mod:`.exits` (the one place exit codes are decided), free of click, and
  :mod:`.output` (the ``--output`` choice);
- :mod:`.inside`: events, top, exec;
- :mod:`.sweep`: ``ma-submit sweep`` and its verbs.

The names below are imported on first use, so that the console script loads click only when it needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import EXIT_INTERRUPTED, VERBS, MaSubmitGroup, cli, json_output_requested
    from .entry import main

__all__ = ["EXIT_INTERRUPTED", "VERBS", "MaSubmitGroup", "cli", "json_output_requested", "main"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(".entry" if name == "main" else ".app", __name__), name)
    globals()[name] = value
    return value
