"""Reading ``server_list`` part by part (``rank_table._parts``) gives exactly what decoding the whole text gives.

Every case is read twice from a real file: by ``read_rank_table`` as it is, and with the part-by-part decoding
switched off (the whole text decoded as before). The two must give the same table, or the same error. Parts are
made small (tens of characters) so that tables of a few servers are cut in many places; the cases that must not be
cut (a repeated or escaped ``server_list`` key, a nested one, a server holding an object that opens like a server,
the placeholder's digits in the file, broken JSON inside a part) are each checked to fall back, and the usual
layouts of a large table to be read by parts.
"""

from __future__ import annotations

import contextlib
import json
import random
from pathlib import Path
from typing import Any, Callable, Iterator
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from malaunch.entrypoint.contract.errors import RankTableError
from malaunch.entrypoint.plan import rank_table
from malaunch.entrypoint.plan.rank_table import RankTableNotReady, _bounded_int, _bulk, _parts, read_rank_table
from shimutil import v10_table

DATA = Path(__file__).parents[1] / "data" / "ranktables"
#: How the tables are written: Python's json.dumps defaults, compact, indented as hccl_tools writes them, and
#: with odd whitespace.
WRITERS: dict[str, Callable[[Any], str]] = {
    "default": json.dumps,
    "compact": lambda data: json.dumps(data, separators=(",", ":")),
    "indent4": lambda data: json.dumps(data, indent=4),
    "tabs": lambda data: json.dumps(data, indent="\t").replace(",\n", " ,\r\n"),
}


@contextlib.contextmanager
def part_size(size: int) -> Iterator[None]:
    with mock.patch.object(_parts, "PART", size), mock.patch.object(
        rank_table, "decode_by_parts", lambda raw, integer: _parts.decode_by_parts(raw, integer, size)
    ):
        yield


def outcome(path: Path) -> Any:
    try:
        return read_rank_table(str(path))
    except (RankTableError, RankTableNotReady) as error:
        return type(error).__name__, str(error)


def as_bytes(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8")


def both(text: str | bytes, tmp_path: Path, part: int = 40) -> tuple[Any, Any]:
    """read_rank_table of ``text`` by parts of ``part`` bytes, and with the whole text decoded."""
    path = tmp_path / "jobstart_hccl.json"
    path.write_bytes(as_bytes(text))
    with part_size(part):
        by_parts = outcome(path)
    with mock.patch.object(rank_table, "decode_by_parts", lambda raw, integer: None):
        whole = outcome(path)
    return by_parts, whole


def takes_parts(text: str, part: int = 40) -> bool:
    found = _parts.decode_by_parts(text.encode(), _bounded_int, part)
    return found is not None and type(found["server_list"]) is _bulk.CheckedServers


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("part", [1, 60, 500, _parts.PART])
def test_a_v10_table_read_by_parts_is_the_whole_decode(writer: str, part: int, tmp_path: Path) -> None:
    text = WRITERS[writer](v10_table(9, 4))
    assert takes_parts(text, part)
    by_parts, whole = both(text, tmp_path, part)
    assert by_parts == whole and by_parts.rank_size == 36


@pytest.mark.parametrize("name", sorted(path.name for path in DATA.glob("*.json")))
def test_the_collected_real_tables_read_alike(name: str, tmp_path: Path) -> None:
    by_parts, whole = both((DATA / name).read_text(encoding="utf-8"), tmp_path, part=1)
    assert by_parts == whole


def test_a_table_with_a_byte_order_mark_is_read_by_parts(tmp_path: Path) -> None:
    text = json.dumps(v10_table(5, 2), ensure_ascii=False).replace("reserve", "r\u00e9serv\u00e9")
    by_parts, whole = both(b"\xef\xbb\xbf" + text.encode(), tmp_path, part=30)
    assert takes_parts(text, 30) and by_parts == whole and by_parts.rank_size == 10


@pytest.mark.parametrize("writer", ["default", "compact", "indent4"])
def test_a_v12_table_with_its_super_pod_list_after_the_servers_is_read_by_parts(writer: str, tmp_path: Path) -> None:
    table = v10_table(60, 2)
    table["version"] = "1.2"
    for index, server in enumerate(table["server_list"]):
        server["host_ip"] = f"10.1.0.{index}"
        for device in server["device"]:
            device["super_device_id"] = str(int(device["rank_id"]) + 1000)
    table["super_pod_list"] = [{"super_pod_id": "0", "server_list": [{"server_id": server["server_id"]}
                                                                      for server in table["server_list"]]}]
    text = WRITERS[writer](table)
    assert takes_parts(text, 200) and takes_parts(text, 100_000)
    by_parts, whole = both(text, tmp_path, part=200)
    assert by_parts == whole and by_parts.format == "1.2" and by_parts.rank_size == 120


def test_a_large_table_is_read_by_parts_in_its_usual_layouts() -> None:
    table = v10_table(2048, 16)
    for writer in ("default", "compact", "indent4"):
        text = WRITERS[writer](table)
        assert takes_parts(text, _parts.PART), writer
        assert len(text) > 8 * _parts.PART  # so it was cut into several parts


def shuffled_keys(data: Any, rng: random.Random) -> Any:
    if isinstance(data, dict):
        items = list(data.items())
        rng.shuffle(items)
        return {key: shuffled_keys(value, rng) for key, value in items}
    if isinstance(data, list):
        return [shuffled_keys(value, rng) for value in data]
    return data


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_random_tables_read_by_parts_alike(data: st.DataObject) -> None:
    servers = data.draw(st.integers(min_value=1, max_value=6))
    devices = data.draw(st.integers(min_value=1, max_value=3))
    table: Any = v10_table(servers, devices)
    server = data.draw(st.integers(min_value=0, max_value=servers - 1))
    change = data.draw(st.sampled_from(["none", "rank", "device id", "server id", "host_ip", "extra key", "int rank",
                                        "nested", "status", "superpod", "shuffle"]))  # fmt: skip
    entry = table["server_list"][server]
    if change == "rank":
        entry["device"][0]["rank_id"] = data.draw(st.sampled_from(["0", "99", "x", "", "1,2"]))
    elif change == "device id":
        entry["device"][-1]["device_id"] = data.draw(st.sampled_from(["0", "07", "1024", None]))
    elif change == "server id":
        entry["server_id"] = data.draw(st.sampled_from(["127.0.0.1", "", " ", 7]))
    elif change == "host_ip":
        entry["host_ip"] = data.draw(st.sampled_from(["10.0.0.9", None, ""]))
    elif change == "extra key":
        entry["extra"] = data.draw(st.sampled_from([{"server_id": "x"}, [{"server_id": "y"}], "{\"server_id\""]))
    elif change == "int rank":
        entry["device"][0]["rank_id"] = int(entry["device"][0]["rank_id"])
    elif change == "nested":
        table = {"meta": {"server_list": table["server_list"]}, **table}
    elif change == "status":
        table["status"] = "initializing"
    elif change == "superpod":
        table["version"] = "1.2"
        table["super_pod_list"] = [{"super_pod_id": "0", "server_list": [{"server_id": "127.0.0.1"}]}]
    elif change == "shuffle":
        table = shuffled_keys(table, random.Random(data.draw(st.integers(0, 1000))))
    text = WRITERS[data.draw(st.sampled_from(sorted(WRITERS)))](table)
    part = data.draw(st.sampled_from([1, 30, 200, 100_000]))
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        by_parts, whole = both(text, Path(scratch), part)
    assert by_parts == whole


GOOD = json.dumps(v10_table(3, 2))
SERVERS = json.dumps(v10_table(3, 2)["server_list"])
CASES: dict[str, str | bytes] = {
    # A repeated key: a whole decode keeps the last one, so the table has no servers (an error).
    "repeated key, the last empty": GOOD[:-1] + ', "server_list": []}',
    "repeated key, the last null": GOOD[:-1] + ', "server_list": null}',
    # The same, with the second key spelt with an escape: it decodes to "server_list" but reads otherwise.
    "escaped repeated key": GOOD[:-1] + ', "server\\u005flist": []}',
    "escaped repeated key, the last null": GOOD[:-1] + ', "server\\u005flist": null}',
    # The first "server_list" in the text is nested; the top level's comes after it.
    "nested first": '{"meta": {"server_list": ' + SERVERS + '}, ' + GOOD[1:],
    "nested first, top level empty": '{"meta": {"server_list": ' + SERVERS + '}, "version": "1.0", '
                                     '"status": "completed", "server\\u005flist": []}',
    "nested first, top level null": '{"meta": {"server_list": ' + SERVERS + '}, "version": "1.0", '
                                    '"status": "completed", "server\\u005flist": null}',
    # A server after a number instead of a comma (not JSON): the part before it must not drop the number.
    "no comma before a server": GOOD.replace('}, {"server_id"', '} 7 {"server_id"', 1),
    # A key that holds the text "server_list" after an escaped quote.
    "escaped quote in a key": '{"x\\"server_list": ' + SERVERS + ', "version": "1.0", "status": "completed", '
                              '"server_list": []}',
    # A server holding an object that opens as a server does, in a list: a cut there splits brackets.
    "server-like object inside": GOOD.replace('"host_nic_ip": "reserve"}',
                                              '"extra": [{"server_id": "a"}, {"server_id": "b"}]}', 1),
    # The placeholder's digits in the file.
    "placeholder digits": GOOD[:-1] + ', "note": "' + _parts._PLACEHOLDER + '"}',
    "placeholder as the last server_list": GOOD[:-1] + ', "server_list": ' + _parts._PLACEHOLDER + "}",
    # A list that is followed by another one: the text's last "]" is not the server list's.
    "a list after it": GOOD[:-1] + ', "extra": [1, 2]}',
    # Broken JSON inside the list, and a truncated file.
    "broken in a part": GOOD.replace('"device_ip": "192.168.1.0"', '"device_ip": 192.168.1.0'),
    "truncated": GOOD[: len(GOOD) // 2],
    "not UTF-8 in a part": GOOD.encode().replace(b"192.168.1.0", b"192.168.1.\xff"),
    "no servers": '{"version": "1.0", "status": "completed", "server_list": []}',
    "servers not objects": '{"version": "1.0", "status": "completed", "server_list": [1, 2]}',
    "a string holding a server's opening": GOOD.replace('"reserve"', '"{\\"server_id\\": ], ["', 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("part", [1, 25, 100_000])
def test_texts_that_must_not_be_cut_read_as_a_whole(name: str, part: int, tmp_path: Path) -> None:
    by_parts, whole = both(CASES[name], tmp_path, part)
    assert by_parts == whole


READ_BY_PARTS = ("server-like object inside", "a string holding a server's opening", "a list after it")


@pytest.mark.parametrize("name", [name for name in CASES if name not in READ_BY_PARTS])
def test_texts_that_must_not_be_cut_fall_back(name: str) -> None:
    assert _parts.decode_by_parts(as_bytes(CASES[name]), _bounded_int, 25) is None


@pytest.mark.parametrize("name", READ_BY_PARTS)
def test_texts_with_a_list_or_a_server_like_object_after_a_cut_are_still_read_by_parts(name: str) -> None:
    # The part that does not decode as whole items is read item by item up to the list's own end.
    assert takes_parts(as_bytes(CASES[name]).decode(), 25)


@pytest.mark.parametrize("part", [1, 120, 100_000])
def test_ranks_that_stop_counting_up_in_a_later_part_are_read_alike(part: int, tmp_path: Path) -> None:
    # The first parts' ranks run "0", "1", ... and are not kept; the last servers swap theirs, so the ranks of the
    # whole list must then be known again, the first parts' among them.
    table = v10_table(6, 2)
    last, before = table["server_list"][-1]["device"], table["server_list"][-2]["device"]
    for mine, theirs in zip(last, before):
        mine["rank_id"], theirs["rank_id"] = theirs["rank_id"], mine["rank_id"]
    text = json.dumps(table)
    assert takes_parts(text, part)
    by_parts, whole = both(text, tmp_path, part)
    assert by_parts == whole and [server.server_id for server in by_parts.servers][-2:] == ["127.0.0.6", "127.0.0.5"]
