"""The worker pods' output as one stream of lines, each naming its pod's host in its one prefix (``[host 1 rank 2]
...``, :mod:`..lineprefix`), read once or followed until the job ends.

Following starts one reader thread per pod as soon as its worker container has started (a pod that Volcano
re-creates after a restart gets a new reader: pods are told apart by their uid) and ends once the job has
ended and every reader has drained its pod's stream. Lines are decoded as UTF-8 with replacement.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Deque, Dict, Iterator, List, Mapping, Sequence, Tuple

from ..lineprefix import host_line
from .phases import host_index

__all__ = ["READ_AHEAD", "RELIST_POLLS", "LineSplitter", "follow_pod_logs", "read_pod_logs", "started_pods"]

#: Hosts' logs read ahead of the one being printed (``ma-submit logs`` of an ended or unfollowed job).
READ_AHEAD = 8
#: A follower whose every pod runs lists them again after this many polls (sooner when something changes).
RELIST_POLLS = 10

ListPods = Callable[[], Sequence[Mapping[str, Any]]]
ReadLog = Callable[[str, bool], Iterator[bytes]]  # (pod name, follow) -> chunks
_DONE = object()


class LineSplitter:
    """Turns chunks of host ``host``'s log into complete lines naming the host; :meth:`flush` gives a last line
    without newline."""

    def __init__(self, host: int) -> None:
        self.host = host
        self._partial = b""

    def feed(self, chunk: bytes) -> List[str]:
        """Complete lines in ``chunk`` (with what was left from before)."""
        parts = (self._partial + chunk).split(b"\n")
        self._partial = parts.pop()
        return [self._decode(part) for part in parts]

    def flush(self) -> List[str]:
        """The last partial line, if any."""
        rest, self._partial = self._partial, b""
        return [self._decode(rest)] if rest else []

    def _decode(self, raw: bytes) -> str:
        return host_line(self.host, raw.rstrip(b"\r").decode("utf-8", errors="replace"))


def _started(pod: Mapping[str, Any]) -> bool:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        state = status.get("state") or {}
        if state.get("running") or state.get("terminated"):
            return True
    return False


def started_pods(pods: Sequence[Mapping[str, Any]]) -> List[Tuple[int, str, str]]:
    """``(host index, name, uid)`` of each pod whose worker container has started, by index."""
    out = []
    for pod in pods:
        index = host_index(pod)
        meta = pod.get("metadata") or {}
        if index is not None and _started(pod):
            out.append((index, str(meta.get("name", "")), str(meta.get("uid") or meta.get("name", ""))))
    return sorted(out)


def read_pod_logs(list_pods: ListPods, read_log: ReadLog, *, ahead: int = READ_AHEAD) -> Iterator[str]:
    """Every line so far of every started worker pod, host after host.

    The API serves one pod's log per request: the host being printed streams, and the next ``ahead`` hosts'
    logs are read meanwhile, each by a thread of its own (so a job of N hosts costs about N / ``ahead`` round
    trips rather than N, and at most ``ahead`` logs wait in memory).
    """
    pods = started_pods(list_pods())
    with ThreadPoolExecutor(max_workers=max(ahead, 1), thread_name_prefix="pod-log") as pool:
        waiting: Deque[Future[bytes]] = deque()  # the logs of the hosts after the one being printed, in order
        submitted = 1  # host 0's log streams as it is printed
        try:
            for position, (index, name, _uid) in enumerate(pods):
                while ahead > 0 and submitted < len(pods) and submitted <= position + ahead:
                    waiting.append(pool.submit(_whole, read_log, pods[submitted][1]))
                    submitted += 1
                streamed = position == 0 or ahead <= 0
                chunks = read_log(name, False) if streamed else iter([waiting.popleft().result()])
                splitter = LineSplitter(index)
                for chunk in chunks:
                    yield from splitter.feed(chunk)
                yield from splitter.flush()
        finally:
            for future in waiting:  # printing stopped early (an error, or the caller closed the lines)
                future.cancel()


def _whole(read_log: ReadLog, name: str) -> bytes:
    return b"".join(read_log(name, False))


def _reader(index: int, name: str, read_log: ReadLog, out: queue.Queue[object]) -> None:
    splitter = LineSplitter(index)
    try:
        for chunk in read_log(name, True):
            for line in splitter.feed(chunk):
                out.put(line)
        for line in splitter.flush():
            out.put(line)
    except BaseException as exc:
        out.put(exc)
    finally:
        out.put(_DONE)


def follow_pod_logs(
    list_pods: ListPods,
    read_log: ReadLog,
    ended: Callable[[], bool],
    *,
    poll: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    relist: int = RELIST_POLLS,
) -> Iterator[str]:
    """New lines of every worker pod as they come, until ``ended()`` and every stream is drained.

    ``ended()`` is asked every ``poll`` seconds; the pods are listed again only when that can show something
    new: while a listed pod has not started, after a stream ended (its pod may be replaced), once the job has
    ended, and otherwise every ``relist`` polls (a pod added to a running job; its log is read from its start).
    Listing every pod of a 1,024-host job each second is what a quiet follower would spend its time on.
    """
    lines: queue.Queue[object] = queue.Queue()
    seen: Dict[str, bool] = {}  # pod uid -> its reader is still running
    running = 0
    stale = relist  # polls since the pods were listed; relist or more: list them (at once, the first time)
    while True:
        finished = ended()  # read first: pods listed afterwards include every pod the job ever ran
        stale += 1
        if finished or stale >= relist:
            listed = list_pods()
            started = started_pods(listed)
            stale = 0 if listed and len(started) == len(listed) else relist  # someone still to start: look again
            for index, name, uid in started:
                if uid not in seen:
                    seen[uid] = True
                    running += 1
                    args = (index, name, read_log, lines)
                    threading.Thread(target=_reader, args=args, name=f"log-{name}", daemon=True).start()
        deadline = clock() + poll
        while True:
            wait = deadline - clock()
            if running == 0 and finished:
                break
            try:
                item = lines.get(timeout=max(wait, 0.0)) if wait > 0 else lines.get_nowait()
            except queue.Empty:
                break
            if item is _DONE:
                running -= 1
                stale = relist  # a stream ended: its pod may be replaced
            elif isinstance(item, BaseException):
                raise item
            else:
                yield str(item)
        if finished and running == 0:
            return
