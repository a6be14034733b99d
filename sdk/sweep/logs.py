"""A sweep's output: every submitted trial's lines, each naming its trial in its one prefix (``[trial 3 host 1
rank 2] ``, :mod:`..backends.lineprefix`), read once or followed.

Following starts one reader thread per trial as the trial gets submitted (each reads the trial's job with
``Backend.logs(follow=True)``) and ends when the sweep is done and every reader has drained its trial, so the
lines of trials running side by side come out as they are written, each line whole.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from typing import Any, Callable, Dict, Iterator, Mapping, Optional

from ..backends.base import Backend
from ..backends.lineprefix import trial_line
from ..errors import MalaunchError
from .run import is_done

__all__ = ["sweep_lines"]

_DONE = object()


def _read(backend: Backend, index: int, job_id: str, out: queue.Queue[object]) -> None:
    try:
        for line in backend.logs(job_id, follow=True):
            out.put(trial_line(index, line))
    except MalaunchError as error:  # one trial's reader failing ends only that trial's lines
        out.put(f"[trial {index}] (its output could not be read: {error})")
    finally:
        out.put(_DONE)


def sweep_lines(
    backend: Backend,
    refresh: Callable[[], Mapping[str, Any]],
    *,
    trial: Optional[int] = None,
    follow: bool = False,
    poll: float = 0.5,
) -> Iterator[str]:
    """The lines of every submitted trial (only ``trial`` if given); with ``follow`` until the sweep is done.

    ``refresh`` returns the sweep's record (a scheduling step when following, so waiting trials start).
    """
    record = refresh()
    if not follow:
        for item in record["trials"]:
            if item.get("job_id") and (trial is None or item["index"] == trial):
                for line in backend.logs(str(item["job_id"]), follow=False):
                    yield trial_line(int(item["index"]), line)
        return
    lines: queue.Queue[object] = queue.Queue()
    readers: Dict[int, threading.Thread] = {}
    finished = 0
    while True:
        for item in record["trials"]:
            index = int(item["index"])
            if item.get("job_id") and index not in readers and (trial is None or index == trial):
                reader = threading.Thread(
                    target=_read, args=(backend, index, str(item["job_id"]), lines), name=f"trial-{index}", daemon=True
                )
                readers[index] = reader
                reader.start()
        got: object = None
        with contextlib.suppress(queue.Empty):
            got = lines.get(timeout=poll)
        while got is not None:
            if got is _DONE:
                finished += 1
            else:
                yield str(got)
            got = None
            with contextlib.suppress(queue.Empty):
                got = lines.get_nowait()
        if is_done(record) and finished == len(readers):
            return
        record = refresh()
