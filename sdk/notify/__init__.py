"""Notifications: a job's ``notify:`` targets told of its events (failed, succeeded, restarted, hung, ...).

- :mod:`.targets`: the model (``NotifyTarget``) and its checks, used by the job spec;
- :mod:`.payload`: the event payload (one format with the shim's) and ``MALAUNCH_NOTIFY`` for the hosts;
- :mod:`.delivery`: one event to one target, retried with tenacity within the timeout;
- :mod:`.check`: what submit refuses on this machine (a command not found, a secret not set);
- :mod:`.trial`: ``ma-submit notify test``: a sample event to every target, each result reported.

Host 0's shim sends a running job's events (``malaunch.entrypoint.run.notify``); the SDK sends only what it sees
first-hand.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .delivery import Delivery, deliver
    from .payload import notify_variable, sample_payload
    from .targets import NotifyTarget, targets_from_data
    from .trial import notify_test

_HOMES = {"Delivery": ".delivery", "deliver": ".delivery", "notify_variable": ".payload",
          "sample_payload": ".payload", "NotifyTarget": ".targets", "targets_from_data": ".targets",
          "notify_test": ".trial"}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name], __name__), name)


__all__ = ["Delivery", "NotifyTarget", "deliver", "notify_test", "notify_variable", "sample_payload",
           "targets_from_data"]
