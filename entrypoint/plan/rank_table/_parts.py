"""Decoding a large ``server_list`` part by part, so that one part's decoded servers are freed before the next.

A 32,768-rank table decodes into about 100,000 objects (a dict per device and its strings), of which the parsed
table keeps only the columns. Decoded whole, they are all alive at once: about 14 MB of fresh memory, whose first
touch (a page fault per 4 KiB) costs a small machine about as much as a third of the decoding, and which then has
to be freed. :func:`decode_by_parts` decodes the file's ``server_list`` in parts of about :data:`PART` bytes
instead (never making the whole file one string either), hands each part's servers to
:class:`~._bulk.ServerColumns` and drops them, and decodes the rest of the table with a placeholder where the list
was. It returns that rest with the list replaced by the servers, already checked and built
(:class:`~._bulk.CheckedServers`), for :func:`~._parse.parse_rank_table` to finish.

It applies only where the result is sure to be what decoding the whole text gives, and otherwise returns None (the
caller then decodes the whole text as before, which also reports every error):

- The list is the value of the first ``"server_list"`` in the text (a ``:`` and a ``[`` after it), and the rest of
  the table, decoded with :data:`_PLACEHOLDER` (a number found nowhere else in it) in the list's place, is an object
  whose ``server_list`` is that placeholder: the list is then the top level's ``server_list``, and the last one if the
  key is repeated, as a whole decode keeps it.
- Parts begin where the first server's opening text (its ``{`` up to the end of its first key) appears again, just
  after a comma; the list ends at the text's last ``]``. A match inside a nested value, a string or past the list
  cannot give parts that each decode (each would hold unbalanced brackets, an unterminated string or a stray key),
  so such a cut is found out.
- Every part decodes to servers of the well-formed common case (:meth:`~._bulk.ServerColumns.add`).

The parts then tile the list exactly (a comma and whitespace between them), so the whole text is valid JSON whose
``server_list`` holds the parts' servers in order.
"""

from __future__ import annotations

from ...contract._record import TYPE_CHECKING
from .. import jsontext
from ._bulk import CheckedServers, ServerColumns

if TYPE_CHECKING:
    from typing import Any, Callable, Optional

__all__ = ["PART", "decode_by_parts"]

#: Bytes of ``server_list`` decoded at a time (a 32,768-rank table has about 2.4 million): smaller parts cost more
#: calls, larger ones more fresh memory (each part is copied into a string twice).
PART = 1 << 15
_KEY = b'"server_list"'
_SPACE = frozenset(b" \t\n\r")  # JSON's whitespace, as the bytes' values
#: Stands for the list while the rest of the table is decoded: a valid JSON integer no real table holds.
_PLACEHOLDER = "-7316280451193728046"
_STANDS_FOR_THE_LIST = object()


def _skip_space(raw: bytes, index: int) -> int:
    while index < len(raw) and raw[index] in _SPACE:
        index += 1
    return index


def decode_by_parts(raw: bytes, integer: Callable[[str], Any], part: int = PART) -> Optional[dict[Any, Any]]:
    """The table decoded from UTF-8 ``raw`` (without a byte order mark), its ``server_list`` decoded and checked part
    by part (see the module), or None where that does not apply. ``integer`` reads JSON integers (as the caller's
    whole decode does). Only the parts are made text, never the whole file at once. Never raises for bad input: bad
    input gives None."""
    key = raw.find(_KEY)
    if key < 0:
        return None
    colon = _skip_space(raw, key + len(_KEY))
    opening = _skip_space(raw, colon + 1)
    first = _skip_space(raw, opening + 1)
    closing = raw.rfind(b"]")
    if raw[colon:colon + 1] != b":" or raw[opening:opening + 1] != b"[" or raw[first:first + 1] != b"{" \
            or closing <= first:  # fmt: skip
        return None
    first_key = _skip_space(raw, first + 1)
    end_of_key = raw.find(b'"', first_key + 1)
    if raw[first_key:first_key + 1] != b'"' or end_of_key < 0 or b"\\" in raw[first_key:end_of_key]:
        return None
    marker = raw[first:end_of_key + 1]  # e.g. b'{"server_id"', or with the file's indentation between
    placeholder = _PLACEHOLDER.encode()
    rest = raw[:opening] + placeholder + raw[closing + 1:]
    if rest.count(placeholder) != 1:
        return None
    columns = ServerColumns()
    start = first
    try:
        while True:
            cut = raw.find(marker, start + part, closing)
            if cut < 0:
                break
            comma = cut - 1
            while raw[comma] in _SPACE:
                comma -= 1
            if raw[comma] != 44 or not columns.add(_decoded_list(raw, start, comma, integer)):  # 44: a comma
                return None
            start = cut
        if not columns.add(_decoded_list(raw, start, closing, integer)):
            return None

        def number(digits: str) -> Any:
            return _STANDS_FOR_THE_LIST if digits == _PLACEHOLDER else integer(digits)

        top = jsontext.loads(rest.decode("utf-8"), number)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, or numbers the caller refuses: the whole decode says
        return None
    if type(top) is not dict or top.get("server_list") is not _STANDS_FOR_THE_LIST:
        return None
    servers = columns.servers()
    if servers is None:
        return None
    top["server_list"] = CheckedServers(servers)
    return top


def _decoded_list(raw: bytes, start: int, end: int, integer: Callable[[str], Any]) -> Any:
    """``raw[start:end]`` decoded as the items of a JSON list."""
    return jsontext.loads("[" + raw[start:end].decode("utf-8") + "]", integer)
