"""Follow one ModelArts task's log by byte offset: every byte is read and shown once, gaps are said out loud.

A :class:`TaskLog` keeps the offset up to which a task's log has been shown and the last unfinished line. It
is fed either bytes starting at a known offset (a ``Range`` read of the whole log through the link that
``.../logs/url`` gives) or a preview (the platform's ``.../logs/preview``: only the last 5 MB of the log plus
its full size). When more arrived between two previews than a preview holds, the bytes in between cannot be
shown; :meth:`TaskLog.feed_preview` reports how many, so the caller can say so and where the whole log is.
A log that got shorter started again (the task was restarted) and is read from its start. Pure: no I/O.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from ..lineprefix import SDK_WRITER, host_line, prefixed

__all__ = ["TaskLog", "skipped_notice"]


def _line(host: int, raw: bytes) -> str:
    return host_line(host, raw.rstrip(b"\r").decode("utf-8", errors="replace"))


def skipped_notice(host: int, task: str, skipped: int, where: str) -> str:
    """The line shown in place of bytes the preview skipped (the SDK's own, in host ``host``'s place)."""
    return prefixed(host, f"{skipped} bytes of {task}'s log are not shown: more arrived between two reads than the "
                          f"platform's log preview holds; the whole log is at {where}", SDK_WRITER)  # fmt: skip


class TaskLog:
    """One task's log position (see the module docstring); every line names the task's ``host`` in its one prefix
    (``[host 0 rank 1] ``, :mod:`..lineprefix`)."""

    def __init__(self, host: int) -> None:
        self.host = host
        self.offset = 0
        self.partial = b""
        self.restarts = 0

    def _lines(self, chunk: bytes) -> List[str]:
        parts = (self.partial + chunk).split(b"\n")
        self.partial = parts.pop()
        return [_line(self.host, raw) for raw in parts]

    def feed(self, data: bytes, start: int) -> List[str]:
        """Bytes ``data`` of the log from byte ``start`` on; the complete new lines."""
        end = start + len(data)
        if end < self.offset and start == 0:  # the whole log is shorter than what was shown: it started again
            self.offset, self.partial, self.restarts = 0, b"", self.restarts + 1
        if end <= self.offset or start > self.offset:
            return []
        chunk = data[self.offset - start :]
        self.offset = end
        return self._lines(chunk)

    def feed_preview(self, content: bytes, full_size: int, task: str, where: str) -> Tuple[List[str], int]:
        """A preview (the log's last bytes and its full size); the new lines and how many bytes it skipped.

        Skipped bytes are shown as one :func:`skipped_notice` line (naming ``task`` and ``where``) in their place.
        """
        if full_size < self.offset:
            self.offset, self.partial, self.restarts = 0, b"", self.restarts + 1
        fresh = full_size - self.offset
        if fresh <= 0:
            return [], 0
        if fresh <= len(content):
            return self.feed(content[len(content) - fresh :], self.offset), 0
        skipped = fresh - len(content)
        lines = [_line(self.host, self.partial)] if self.partial else []  # the line before the gap, as far as known
        lines.append(skipped_notice(self.host, task, skipped, where))
        self.partial = b""
        self.offset = full_size - len(content)
        return lines + self.feed(content, self.offset), skipped

    def flush(self) -> Optional[str]:
        """The last line when it has no newline (at the end of the job), once."""
        if not self.partial:
            return None
        text, self.partial = _line(self.host, self.partial), b""
        return text
