"""HTML made safe by construction: :class:`Markup` is text already safe to put in a page; everything else is
escaped on the way in.

:func:`html` fills a template's ``{name}`` fields (``str.format`` syntax), escaping every value that is not
:class:`Markup` or a number, so a job's name, a host's address, a log line or an event's message that holds ``<script>``
shows as text. :func:`join` joins pieces the same way. Nothing else in the page's Python builds HTML from
strings.
"""

from __future__ import annotations

import html as _html
from typing import Iterable

__all__ = ["Markup", "escape", "html", "join"]


class Markup(str):
    """Text that is already HTML (a template's output, or escaped text)."""

    __slots__ = ()


def escape(value: object) -> Markup:
    """``value`` as HTML: Markup as it is, anything else as escaped text (quotes too; ``None`` as empty)."""
    if isinstance(value, Markup):
        return value
    return Markup(_html.escape("" if value is None else str(value), quote=True))


def html(template: str, /, **values: object) -> Markup:
    """``template`` (trusted: a literal of this package) with each ``{name}`` filled by its value, escaped."""
    return Markup(template.format(**{name: _field(value) for name, value in values.items()}))


def _field(value: object) -> object:
    """A number as it is (for format specs such as ``{v:.3g}``; numbers hold no markup), anything else escaped."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return escape(value)


def join(pieces: Iterable[object], separator: str = "") -> Markup:
    """The pieces, each escaped unless Markup, joined by ``separator`` (trusted)."""
    return Markup(separator.join(escape(piece) for piece in pieces))
