"""How ``ma-submit`` prints, without click: :func:`echo` writes what ``click.echo`` writes for a text.

That is the text and a newline on stdout (``err``: stderr), flushed; nothing when the stream is None (closed by
the caller); escape sequences of colours and styles removed when the stream is no terminal. Every verb prints
through here, under click and under the quick path (:mod:`.quick`) alike, so their output is one. A stream whose
encoding is ASCII (``PYTHONIOENCODING=ascii``) gets UTF-8, unencodable characters replaced, as click writes it.
"""

from __future__ import annotations

import codecs
import json
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional, TextIO

__all__ = ["echo", "echo_json", "note"]

#: What click removes from text for a stream that is no terminal (a CSI escape sequence).
_ANSI = r"\033\[[0-?]*[ -/]*[@-~]"


def _is_ascii(stream: TextIO) -> bool:
    """Whether ``stream``'s encoding is ASCII (or unknown, which click takes as ASCII)."""
    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "ascii").name == "ascii"
    except LookupError:
        return False


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except Exception:  # a stream that cannot tell is no terminal, as click takes it
        return False


def echo(text: str = "", err: bool = False) -> None:
    """``text`` and a newline on stdout (``err``: stderr), flushed, as ``click.echo(text, err=err)`` writes it."""
    stream: Optional[TextIO] = sys.stderr if err else sys.stdout
    if stream is None:
        return
    out = text + "\n"
    if "\033" in out and not _is_terminal(stream):
        import re  # only for output that carries an escape sequence

        out = re.sub(_ANSI, "", out)
    binary = getattr(stream, "buffer", None) if _is_ascii(stream) else None
    if binary is not None:  # click's answer to an ASCII stream: its bytes, in UTF-8
        stream.flush()
        binary.write(out.encode("utf-8", "replace"))
        binary.flush()
        return
    stream.write(out)
    stream.flush()


def note(text: str) -> None:
    """A progress or note line on stderr."""
    echo(f"ma-submit: {text}", err=True)


def echo_json(data: Any) -> None:
    """Pretty JSON on stdout."""
    echo(json.dumps(data, indent=2))
