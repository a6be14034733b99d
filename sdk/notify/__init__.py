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

from typing import List

__all__: List[str] = []  # each module's names are imported from it
