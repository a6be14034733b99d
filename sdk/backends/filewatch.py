"""Sleep until a file may have changed: the kernel's inotify where it works, a plain sleep where it does not.

:class:`ChangeWatch` watches the folders of the files it is given (a folder, not the file: a file that does not
exist yet, or is replaced by a rename, is still seen) and wakes its caller as soon as one of those files is
written, created or moved into place; changes to other files of the same folders are read and ignored, so an
idle follower stays asleep. inotify is reached through ``ctypes`` (no dependency). When it cannot be used (a
kernel or C library without it, the per-user limit of watches or instances reached, a folder that cannot be
watched) the watch polls instead: :meth:`ChangeWatch.wait` sleeps its timeout and says it cannot tell what
changed. A folder that does not exist yet is watched once it does; meanwhile the wait is short (``poll``).

Nothing is ever lost by waiting: a wake-up only says *when* to read again, the caller reads the files itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import struct
import time
from typing import Callable, Dict, FrozenSet, Iterable, List, Optional, Set

__all__ = ["ChangeWatch"]

_IN_MODIFY = 0x00000002
_IN_CLOSE_WRITE = 0x00000008
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_Q_OVERFLOW = 0x00004000
_IN_IGNORED = 0x00008000
_IN_ONLYDIR = 0x01000000
_MASK = _IN_MODIFY | _IN_CLOSE_WRITE | _IN_MOVED_TO | _IN_CREATE | _IN_ONLYDIR
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name, NUL-padded)
_READ_SIZE = 64 << 10
_MAX_READS = 128  # 8 MiB: more than the kernel queues (16,384 events by default) before it reports an overflow


def _inotify_calls() -> Optional[tuple[Callable[[int], int], Callable[[int, bytes, int], int]]]:
    """``inotify_init1`` and ``inotify_add_watch`` of the C library, or None when there are none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the interpreter's own C library (no search, no subprocess)
        init = libc.inotify_init1
        add = libc.inotify_add_watch
    except (OSError, AttributeError):
        return None
    init.argtypes = [ctypes.c_int]
    init.restype = ctypes.c_int
    add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    add.restype = ctypes.c_int
    return init, add


class ChangeWatch:
    """Wakes when one of ``paths`` may have changed (see the module docstring). ``use_kernel=False`` polls."""

    def __init__(
        self,
        paths: Iterable[str],
        *,
        use_kernel: bool = True,
        poll: float = 0.1,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._names: Dict[str, Set[str]] = {}  # folder -> the names in it that matter
        for path in paths:
            folder, name = os.path.split(os.path.abspath(path))
            self._names.setdefault(folder, set()).add(name)
        self._poll = poll
        self._sleep = sleep
        self._fd: Optional[int] = None
        self._add: Optional[Callable[[int, bytes, int], int]] = None
        self._watched: Dict[int, str] = {}  # watch descriptor -> folder
        self._folders: Set[str] = set()  # the folders watched
        self._poller: Optional[select.poll] = None
        calls = _inotify_calls() if use_kernel else None
        if calls is not None:
            init, self._add = calls
            fd = init(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd >= 0:
                self._fd = fd
                self._poller = select.poll()
                self._poller.register(fd, select.POLLIN)

    @property
    def kernel(self) -> bool:
        """True while the kernel tells what changed; False when polling."""
        return self._fd is not None

    def _watch_new_folders(self) -> tuple[bool, bool]:
        """Watch the folders that are not watched yet: (one was added, one is still missing). A folder that
        exists but cannot be watched (no watches left) turns the watch into polling."""
        assert self._fd is not None and self._add is not None
        added = missing = False
        for folder in self._names:
            if folder in self._folders:
                continue
            wd = self._add(self._fd, os.fsencode(folder), _MASK)
            if wd >= 0:
                self._watched[wd] = folder
                self._folders.add(folder)
                added = True
            elif os.path.isdir(folder):
                self.close()  # it exists and still cannot be watched: poll from now on
                return True, False
            else:
                missing = True
        return added, missing

    def wait(self, timeout: float) -> Optional[FrozenSet[str]]:
        """Sleep until a watched file changes or ``timeout`` seconds pass. The paths that changed (empty: the
        timeout passed), or None when any of them may have changed (polling, a folder just watched, a lost
        event queue)."""
        if self._fd is None or self._poller is None:
            self._sleep(min(timeout, self._poll))
            return None
        added, missing = self._watch_new_folders()
        if added or self._fd is None:
            return None  # written before the folder was watched: read everything once
        if missing:
            timeout = min(timeout, self._poll)
        deadline = time.monotonic() + timeout
        while True:
            left = max(0.0, deadline - time.monotonic())
            try:
                ready = self._poller.poll(int(left * 1000) + (1 if left > 0 else 0))
            except InterruptedError:  # pragma: no cover - poll is retried by Python (PEP 475)
                ready = []
            if not ready:
                return frozenset()
            changed = self._read_events()
            if changed is None or changed:
                return changed
            if time.monotonic() >= deadline:
                return frozenset()

    def _read_events(self) -> Optional[FrozenSet[str]]:
        """The watched paths named by the queued events, all of them (None: events were lost, or a folder went
        away)."""
        assert self._fd is not None
        chunks: List[bytes] = []
        try:
            while len(chunks) < _MAX_READS:  # the rest, if any, wakes the next wait
                chunks.append(os.read(self._fd, _READ_SIZE))
        except BlockingIOError:
            pass
        except OSError:
            self.close()
            return None
        data = b"".join(chunks)
        changed: List[str] = []
        unsure = False
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
            raw = data[offset + _EVENT.size : offset + _EVENT.size + length]
            offset += _EVENT.size + length
            if mask & _IN_Q_OVERFLOW:
                unsure = True
                continue
            folder = self._watched.get(wd)
            if folder is None:
                continue
            if mask & _IN_IGNORED:  # the folder was removed or moved: watched again once it is back
                self._folders.discard(self._watched.pop(wd))
                unsure = True
                continue
            name = os.fsdecode(raw.rstrip(b"\0"))
            if name in self._names[folder]:
                changed.append(os.path.join(folder, name))
        return None if unsure else frozenset(changed)

    def close(self) -> None:
        """Stop watching (idempotent); later waits poll."""
        fd, self._fd, self._poller = self._fd, None, None
        self._watched.clear()
        self._folders.clear()
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> ChangeWatch:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
