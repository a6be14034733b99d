"""The local backend's queue: jobs wait until this machine has the devices they take, then start in order.

- :mod:`.capacity`: the machine's devices (``MALAUNCH_LOCAL_CAPACITY``, ``local.capacity``, accelerators, CPUs)
  and a job's need (hosts x devices per host);
- :mod:`.store`: the queue's files under ``<home>/queue/`` and the pure :func:`~.store.plan_queue`;
- :mod:`.scheduler`: the one small scheduler process, started when a job must wait and none runs; it exits when
  the queue is empty. A scheduler killed at any point loses nothing: the next ``ma-submit`` call starts another.
"""

from __future__ import annotations

__all__: list[str] = []
