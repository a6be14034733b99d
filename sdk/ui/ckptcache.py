"""The job page's checkpoint rows, listed at most once per lifetime per job (``Backend.checkpoints``).

A job page refreshes its parts every 2 s while it is open; listing a large checkpoint folder, or an OBS folder
(requests to the cloud), that often is work nobody sees change. :class:`CheckpointCache` keeps each listing (or
the backend's refusal, in words) for :data:`LOCAL_LIFETIME` seconds on a backend that runs its jobs on this
machine and :data:`CLOUD_LIFETIME` seconds on the others. An entry is one job's alone, at one state of it: the key
is the backend, the job's whole id and its state, so another job's rows are never served, and a job that ends is
listed again at once (a folder being written reads as one with no marker once the job ended). Entries past their
lifetime are dropped whenever one is added, so the cache holds only the jobs looked at lately.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, NamedTuple, Optional, Tuple

from ..backends.checkpoints import CheckpointListing
from ..errors import MalaunchError

__all__ = ["CLOUD_LIFETIME", "LOCAL_LIFETIME", "CheckpointCache", "Listed"]

#: Seconds a listing of a folder on this machine is shown again before it is read anew.
LOCAL_LIFETIME = 5.0
#: Seconds a listing of a cloud backend's folder (OBS, a cluster's volume) is shown again.
CLOUD_LIFETIME = 30.0

Key = Tuple[str, str, str]  # (backend, job id, job state)


class Listed(NamedTuple):
    """A listing as the page shows it: the rows, or (None) the backend's refusal in its own words."""

    listing: Optional[CheckpointListing]
    refused: str
    at: float  # when it was read (the cache's clock)


class CheckpointCache:
    """Listings by (backend, job id, state), each kept for its backend's lifetime (see the module's docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, local: float = LOCAL_LIFETIME,
                 cloud: float = CLOUD_LIFETIME) -> None:  # fmt: skip
        self.clock, self.local, self.cloud = clock, local, cloud
        self._entries: Dict[Key, Tuple[Listed, float]] = {}  # key -> (listing, its lifetime)
        self._lock = threading.Lock()

    def read(self, key: Key, here: bool, listing: Callable[[], CheckpointListing]) -> Listed:
        """The listing of ``key`` (``here``: the backend runs its jobs on this machine): the kept one while it is
        young enough, else ``listing()`` called now (a :class:`MalaunchError` kept as its line)."""
        now = self.clock()
        with self._lock:
            kept = self._entries.get(key)
        if kept is not None and now - kept[0].at < kept[1]:
            return kept[0]
        try:
            found = Listed(listing(), "", now)
        except MalaunchError as refused:  # a backend that cannot list them says why, in place
            found = Listed(None, str(refused), now)
        lifetime = self.local if here else self.cloud
        with self._lock:
            self._entries = {k: v for k, v in self._entries.items() if now - v[0].at < v[1]}
            self._entries[key] = (found, lifetime)
        return found
