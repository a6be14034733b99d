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
  after a comma; the last one ends at the text's last ``]``. A part that does not then hold whole items is read
  item by item from its start up to the list's own closing bracket instead: so are a match that is not after a
  comma, one inside a nested value or a string (the part would hold unbalanced brackets or an unterminated
  string), and a last ``]`` that is not the list's (a later key holds a list too, as ``super_pod_list`` does).
- Every part decodes to servers of the well-formed common case (:meth:`~._bulk.ServerColumns.add`).

The parts then tile the list exactly (a comma and whitespace between them), so the whole text is valid JSON whose
``server_list`` holds the parts' servers in order.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .. import jsontext
from ._bulk import CheckedServers, ServerColumns

__all__ = ["PART", "decode_by_parts"]

#: Bytes of ``server_list`` decoded at a time (a 32,768-rank table has about 2.4 million): smaller parts cost more
#: calls, larger ones more fresh memory (each part is copied into a string twice).
PART = 1 << 16
_KEY = b'"server_list"'
_SPACE = frozenset(b" \t\n\r")  # JSON's whitespace, as the bytes' values
_TEXT_SPACE = frozenset(" \t\n\r")  # and as text ("" is not in it: the end stops a skip)
#: Stands for the list while the rest of the table is decoded: a valid JSON integer no real table holds.
_PLACEHOLDER = "-7316280451193728046"
_STANDS_FOR_THE_LIST = object()


def _skip_space(raw: bytes, index: int) -> int:
    while index < len(raw) and raw[index] in _SPACE:
        index += 1
    return index


def _skip_text_space(text: str, index: int) -> int:
    while text[index:index + 1] in _TEXT_SPACE:
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
    guess = raw.rfind(b"]")  # the list's end, unless something after it holds a list too
    if raw[colon:colon + 1] != b":" or raw[opening:opening + 1] != b"[" or raw[first:first + 1] != b"{" \
            or guess <= first:  # fmt: skip
        return None
    first_key = _skip_space(raw, first + 1)
    end_of_key = raw.find(b'"', first_key + 1)
    if raw[first_key:first_key + 1] != b'"' or end_of_key < 0 or b"\\" in raw[first_key:end_of_key]:
        return None
    marker = raw[first:end_of_key + 1]  # e.g. b'{"server_id"', or with the file's indentation between
    placeholder = _PLACEHOLDER.encode()
    columns = ServerColumns()
    start, end = first, None  # the list's closing bracket, once found
    try:
        while end is None:
            cut = raw.find(marker, start + part, guess)
            stop = guess if cut < 0 else _before_space(raw, cut)
            servers = _items(raw, start, stop, integer) if cut < 0 or raw[stop] == 44 else None  # 44: a comma
            if servers is None:  # not whole items: the list ends inside (a later list holds a "]") or a cut is false
                servers, end = _items_to_close(raw, start, integer)
            elif cut < 0:
                end = guess
            if not columns.add(servers):
                return None
            start = cut
        rest = raw[:opening] + placeholder + raw[end + 1:]
        if rest.count(placeholder) != 1:
            return None

        def number(digits: str) -> Any:
            return _STANDS_FOR_THE_LIST if digits == _PLACEHOLDER else integer(digits)

        top = jsontext.loads(rest.decode("utf-8"), number)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, or numbers the caller refuses: the whole decode says
        return None
    if type(top) is not dict or top.get("server_list") is not _STANDS_FOR_THE_LIST:
        return None
    built = columns.servers()
    if built is None:
        return None
    top["server_list"] = CheckedServers(built)
    return top


def _before_space(raw: bytes, index: int) -> int:
    """The index of the last byte before ``index`` that is not whitespace."""
    index -= 1
    while raw[index] in _SPACE:
        index -= 1
    return index


def _items(raw: bytes, start: int, stop: int, integer: Callable[[str], Any]) -> Optional[list[Any]]:
    """``raw[start:stop]`` decoded as the items of a JSON list, or None if it is not that."""
    try:
        return jsontext.loads("[" + raw[start:stop].decode("utf-8") + "]", integer)  # type: ignore[no-any-return]
    except (ValueError, RecursionError):
        return None


def _items_to_close(raw: bytes, start: int, integer: Callable[[str], Any]) -> tuple[list[Any], int]:
    """The items of the list from ``raw[start]`` (an item) to its closing bracket, one by one, and that bracket's
    index in ``raw``.

    Raises:
        ValueError: the text there is not UTF-8, or is not items up to a closing bracket.
    """
    text = raw[start:].decode("utf-8")
    items: list[Any] = []
    index = 0
    while True:
        item, index = jsontext.scan(text, index, integer)
        items.append(item)
        index = _skip_text_space(text, index)
        if text[index:index + 1] == "]":
            return items, start + len(text[:index].encode("utf-8"))
        if text[index:index + 1] != ",":
            raise ValueError("not the items of a list")
        index = _skip_text_space(text, index + 1)
