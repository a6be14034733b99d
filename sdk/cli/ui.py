"""The ``ui`` verb: its click command lives with the page's server in :mod:`malaunch.sdk.ui` (imported only when
the verb runs or its help is asked)."""

from __future__ import annotations

from ..ui.command import ui_cmd

__all__ = ["ui_cmd"]
