"""A local job's progress and time to recover, as its hosts' shims record them (``ma-submit status`` and ``top``).

Each host's shim gives its ranks ``MALAUNCH_PROGRESS_DIR`` (``hosts/<i>/logs/progress.d``), where
``checkpoint.progress()`` keeps each rank's last step; host 0's shim keeps the time to recover after each failed
attempt in ``hosts/0/logs/recovery.json``. Both are read defensively (the shim's readers). A next attempt whose
first progress the shim has not written down yet (it does when that attempt ends) gets it here from the ranks'
records of every host.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, List, Tuple

from malaunch.entrypoint.public import (
    PROGRESS_DIR_NAME,
    read_progress,
    read_recovery,
    recovery_file,
    with_first_progress,
)

from .jobdir import JobPaths

if TYPE_CHECKING:
    from malaunch.entrypoint.public import RankProgress, Recovery

__all__ = ["job_progress"]


def job_progress(paths: JobPaths, hosts: int) -> Tuple[Tuple[RankProgress, ...], Tuple[Recovery, ...]]:
    """Every rank's last progress record (each host's, host by host) and host 0's time-to-recover records."""
    records: List[RankProgress] = []
    for index in range(max(hosts, 1)):
        records += read_progress(os.path.join(paths.log_dir(index), PROGRESS_DIR_NAME), host=index)
    recovery = with_first_progress(read_recovery(recovery_file(paths.log_dir(0))), records)
    return tuple(records), tuple(recovery)
