"""How ``ma-submit`` prints, without click: :func:`echo` writes what ``click.echo`` writes for a text.

That is the text and a newline on stdout (``err``: stderr), flushed; nothing when the stream is None (closed by
the caller); escape sequences of colours and styles removed when the stream is no terminal. Every verb prints
through here. A stream whose
encoding is ASCII (``PYTHONIOENCODING=ascii``) gets UTF-8, unencodable characters replaced, as click writes it.

Unlike ``click.echo``, no output is lost in silence: a reader that goes away midway (``ma-submit list | head``) ends
the verb with :class:`~malaunch.entrypoint.report.streams.StreamClosed`, which both paths end with 1 as click ends a
closed pipe, and a line on stderr says after how many bytes and lines stdout stopped; so does a full disk
(:class:`~malaunch.entrypoint.report.streams.OutputCut`).
"""

from __future__ import annotations

import codecs
import json
import re
import sys
from typing import Any, BinaryIO, Callable, Dict, Optional, TextIO, Tuple

from ...entrypoint.public import OutputCut, write_all

__all__ = ["echo", "echo_json", "note", "say_output_lost"]

#: What click removes from text for a stream that is no terminal (a CSI escape sequence).
_ANSI = r"\033\[[0-?]*[ -/]*[@-~]"


def _is_ascii(stream: TextIO) -> bool:
    """Whether ``stream``'s encoding is ASCII (or unknown, which click takes as ASCII)."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    found = _ASCII.get(encoding)
    if found is None:
        try:
            found = _ASCII[encoding] = codecs.lookup(encoding).name == "ascii"
        except LookupError:
            return False
    return found


_ASCII: Dict[str, bool] = {}  # encoding name -> whether it is ASCII (a lookup per printed line would cost)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except Exception:  # a stream that cannot tell is no terminal, as click takes it
        return False


def echo(text: str = "", err: bool = False, *, quiet_loss: bool = False) -> None:
    """``text`` and a newline on stdout (``err``: stderr), flushed, as ``click.echo(text, err=err)`` writes it, but
    never cut short in silence (:func:`~malaunch.entrypoint.report.streams.write_all`).

    Raises:
        OutputCut: writing stdout failed midway (``StreamClosed``: whoever read it went away; or a full disk); a line
            on stderr has said after how much of the output.
        BrokenPipeError: its reader went away under ``quiet_loss`` (the group's help), of which click says nothing
            either.
    """
    stream: Optional[TextIO] = sys.stderr if err else sys.stdout
    if stream is None:
        return
    out = text + "\n"
    if "\033" in out and not _is_terminal(stream):
        out = re.sub(_ANSI, "", out)
    binary = getattr(stream, "buffer", None)
    if binary is None:  # a text-only stream (a test's StringIO): nothing under it to lose bytes
        stream.write(out)
        stream.flush()
        return
    if _is_ascii(stream):  # click's answer to an ASCII stream: its bytes, in UTF-8
        data = out.encode("utf-8", "replace")
    else:  # what the text layer would make of it (no newline translation on Linux)
        data = out.encode(getattr(stream, "encoding", None) or "utf-8", getattr(stream, "errors", None) or "strict")
    stream.flush()  # what went through the text layer first (none of ours: every echo flushes)
    if quiet_loss:  # the group's help, written as click writes it (which loads none of the shim)
        binary.write(data)
        binary.flush()
        return
    write_all, output_cut = _writer()
    try:
        write_all(binary, data)
    except output_cut as cut:
        if not err:
            _STDOUT.count(data[: cut.written])
            say_output_lost(cut, _STDOUT.sent, _STDOUT.lines)
        raise
    if not err:
        _STDOUT.count(data)


class _Delivered:
    """How much of stdout's output reached its reader, to say where a failure cut it."""

    __slots__ = ("lines", "sent")

    def __init__(self) -> None:
        self.sent = 0  # bytes
        self.lines = 0

    def count(self, data: bytes) -> None:
        self.sent += len(data)
        self.lines += data.count(b"\n")


_STDOUT = _Delivered()
_WRITER: Optional[Tuple[Callable[[BinaryIO, bytes], None], type[OutputCut]]] = None


def _writer() -> Tuple[Callable[[BinaryIO, bytes], None], type[OutputCut]]:
    """The shim's writer and the error it raises, imported once, on the first line printed: this is every line's
    path (the lazy seam would look them up each time), and ``--help`` loads none of the shim."""
    global _WRITER
    if _WRITER is None:
        _WRITER = write_all, OutputCut
    return _WRITER


def say_output_lost(cut: OutputCut, sent: int, lines: Optional[int] = None) -> None:
    """The line on stderr that says where ``cut`` stopped stdout: after ``sent`` bytes (``lines`` whole lines).
    Nothing if stderr failed too (``2>&1`` into the same pipe or onto the same full disk)."""
    counted = f" ({lines:,} whole lines)" if lines is not None else ""
    try:
        note(f"the output stopped after {sent:,} bytes{counted}: {cut.why}, and the rest was not written; "
             f"{cut.advice}")
    except OSError:
        return


def note(text: str) -> None:
    """A progress or note line on stderr."""
    echo(f"ma-submit: {text}", err=True)


def echo_json(data: Any) -> None:
    """Pretty JSON on stdout."""
    echo(json.dumps(data, indent=2))
