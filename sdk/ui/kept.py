"""What the job page reads from a backend at most once per lifetime per job: a job's checkpoint rows
(``Backend.checkpoints``) and a cloud job's progress and time to recover (``Backend.status_with_progress``).

A job page refreshes its parts every 2 s while it is open. Listing a large checkpoint folder or an OBS folder, or
reading the end of every host's log on ModelArts or Volcano, that often is work nobody sees change: the shims write
their progress lines at most every 30 s. :class:`KeptReads` keeps each answer (or the backend's refusal, in words)
for :data:`LOCAL_LIFETIME` seconds on a backend that runs its jobs on this machine and :data:`CLOUD_LIFETIME`
seconds on the others. An entry is one job's alone: the key holds the backend and the job's whole id (and, for a
listing, the job's state, so a job that ends is listed again at once: a folder being written reads as one with no
marker once the job ended), so another job's answer is never served. Entries past their lifetime are dropped
whenever one is added, so the cache holds only the jobs looked at lately.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, Generic, Optional, Tuple, TypeVar

from ..errors import MalaunchError

__all__ = ["CLOUD_LIFETIME", "LOCAL_LIFETIME", "Kept", "KeptReads"]

#: Seconds an answer about a job on this machine is shown again before it is read anew.
LOCAL_LIFETIME = 5.0
#: Seconds an answer about a cloud backend's job (OBS, a cluster's volume, its hosts' logs) is shown again.
CLOUD_LIFETIME = 30.0

T = TypeVar("T")
Key = Tuple[str, ...]  # (backend, job id[, job state])


@dataclass(frozen=True)
class Kept(Generic[T]):
    """An answer as the page shows it: the value, or (None) the backend's refusal in its own words."""

    value: Optional[T]
    refused: str
    at: float  # when it was read (the cache's clock)


class KeptReads(Generic[T]):
    """Answers by key, each kept for its backend's lifetime (see the module's docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, local: float = LOCAL_LIFETIME,
                 cloud: float = CLOUD_LIFETIME) -> None:  # fmt: skip
        self.clock, self.local, self.cloud = clock, local, cloud
        self._entries: Dict[Key, Tuple[Kept[T], float]] = {}  # key -> (answer, its lifetime)
        self._lock = threading.Lock()

    def read(self, key: Key, here: bool, fetch: Callable[[], T]) -> Kept[T]:
        """The answer for ``key`` (``here``: the backend runs its jobs on this machine): the kept one while it is
        young enough, else ``fetch()`` called now (a :class:`MalaunchError` kept as its line)."""
        now = self.clock()
        with self._lock:
            kept = self._entries.get(key)
        if kept is not None and now - kept[0].at < kept[1]:
            return kept[0]
        try:
            found: Kept[T] = Kept(fetch(), "", now)
        except MalaunchError as refused:  # a backend that cannot answer says why, in place
            found = Kept(None, str(refused), now)
        lifetime = self.local if here else self.cloud
        with self._lock:
            self._entries = {k: v for k, v in self._entries.items() if now - v[0].at < v[1]}
            self._entries[key] = (found, lifetime)
        return found
