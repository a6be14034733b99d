"""A host's progress line on its console, at a bounded rate: what a reader of the job's log sees of its progress.

:class:`ProgressBeacon` is looked at by the run's supervisor (about once a second while the attempt runs, and once
more when it ends). It reads this host's ranks' records (``MALAUNCH_PROGRESS_DIR``, :mod:`.progress`) and says the
progress line of :mod:`.statuslines` when the host's summary (the slowest rank's step, the total, the attempt)
changed: at once for an attempt's first record, else at most every :data:`~.statuslines.PROGRESS_EVERY` seconds,
and the last change when the run ends. Records that were there before the run (an earlier attempt's) are not said
again. Each host says its own ranks' (its folder is its own): no message between hosts is needed, and a reader
that reads every host's log has every rank, as ``ma-submit top`` shows them.
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional, Tuple

from .progress import PROGRESS_DIR_VAR, read_progress, summarize
from .statuslines import PROGRESS_EVERY, progress_text

__all__ = ["CHECK_EVERY", "ProgressBeacon"]

#: Seconds between two reads of the records folder at most.
CHECK_EVERY = 1.0

_Key = Tuple[str, int, Optional[int]]  # (attempt, slowest step, total)


class ProgressBeacon:
    """Says this host's progress line through ``say`` (see the module's docstring); times are monotonic."""

    def __init__(self, folder: Optional[str], say: Callable[[str], None], now: float,
                 every: float = PROGRESS_EVERY) -> None:  # fmt: skip
        self.folder, self.say, self.every = folder, say, every
        self.checked = now
        self.said_at: Optional[float] = None
        self.text: Optional[str] = None
        self.said = self._key()  # what is already there is not said again

    @classmethod
    def of(cls, env: Mapping[str, str], say: Callable[[str], None], now: float) -> ProgressBeacon:
        """The beacon of a run whose ranks get ``MALAUNCH_PROGRESS_DIR`` in ``env`` (without one: it says nothing)."""
        return cls(env.get(PROGRESS_DIR_VAR) or None, say, now)

    def _key(self) -> Optional[_Key]:
        records = read_progress(self.folder) if self.folder else []
        found = summarize(records)
        if found is None:
            self.text = None
            return None
        self.text = progress_text(records)
        return (found.attempt, found.step, found.total)

    def look(self, now: float) -> None:
        """Read the records (at most every :data:`CHECK_EVERY` s) and say the line when it is due."""
        if now - self.checked < CHECK_EVERY:
            return
        self.checked = now
        key = self._key()
        if key is None or key == self.said:
            return
        first = self.said is None or key[0] != self.said[0]  # an attempt's first record: at once
        if first or self.said_at is None or now - self.said_at >= self.every:
            self._say(key, now)

    def finish(self, now: float) -> None:
        """The run ends: its last change is said, however recent the line before."""
        key = self._key()
        if key is not None and key != self.said:
            self._say(key, now)

    def _say(self, key: _Key, now: float) -> None:
        if self.text is not None:
            self.say(self.text)
        self.said, self.said_at = key, now
