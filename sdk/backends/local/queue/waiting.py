"""What the local backend asks of the queue and does to it outside a submit: whether any job waits (a look at one
folder), starting a scheduler when jobs wait and none runs (it was killed), and taking a waiting job out (stop,
delete).

The queue's store and scheduler are imported only when a job waits: the everyday verbs look at the folder alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Mapping, Optional

from ....status import JobState
from ..jobdir import JobPaths, job_processes
from ..state import StateWriter, read_state
from .store import QueueStore

__all__ = ["queue_reason", "queued", "take_over", "unqueue"]


def queued(home: str) -> bool:
    """Whether any job waits in the queue under ``home``."""
    try:
        return any(name[:1].isdigit() for name in os.listdir(os.path.join(home, "queue")))
    except OSError:
        return False


def take_over(home: str, environ: Mapping[str, str]) -> None:
    """Jobs wait and no scheduler runs (it was killed): start one (cheap when nothing waits)."""
    if not queued(home):
        return
    store = QueueStore(home)
    if not store.entries() and not store.entries(starting=True) and not store.damaged():
        return
    from .scheduler import ensure_scheduler

    with store.locked():
        ensure_scheduler(home, environ)


def queue_reason(home: str, job_id: str) -> Optional[str]:
    """Why a waiting job waits, as the queue says, or None."""
    return QueueStore(home).reason(job_id)


def unqueue(home: str, paths: JobPaths) -> bool:
    """Take a waiting job out of the queue and record it STOPPED; False when it is not waiting."""
    if not queued(home):
        return False
    from .scheduler import ENV_FILE
    store = QueueStore(home)
    if store.find(paths.job_id) is None:
        return False
    with store.locked():
        found = store.find(paths.job_id)
        if found is None or job_processes(paths.job_id):
            return False  # started meanwhile: stopped as a running job
        store.remove(found[1])
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(paths.job_dir, ENV_FILE))
        final = read_state(paths.state_file).data
        if final is not None and not JobState(final["state"]).is_terminal:
            final.update(state="STOPPED", exit_code=128 + signal.SIGTERM, ended_at=time.time(),
                         message="stopped while it waited in the local queue (it never started)")  # fmt: skip
            StateWriter(paths).save_final(final)
    return True
