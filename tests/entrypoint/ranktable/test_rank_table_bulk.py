"""The bulk checks behind a large rank table's fast path agree with the item-by-item parser.

The fast path (``rank_table._bulk``) checks whole columns at once and takes shortcuts for what is the same on
every server; each shortcut has a case here where it must not apply, and the parse must then give the same table
(or the same error) as the item-by-item walk.
"""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any, Optional
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from malaunch.entrypoint.contract.errors import RankTableError
from malaunch.entrypoint.plan.rank_table import RankTable, _parse, parse_rank_table
from malaunch.entrypoint.plan.rank_table import _bulk as bulk
from malaunch.entrypoint.plan.rank_table.v1 import to_v1_text
from shimutil import v10_table


def item_by_item(data: dict[str, Any]) -> Any:
    """The same table forced onto the item-by-item path: one rank id written as a JSON int (same value)."""
    slow = copy.deepcopy(data)
    device = slow["server_list"][0]["device"][0]
    device["rank_id"] = int(device["rank_id"])
    return slow


def both(data: dict[str, Any]) -> tuple[Any, Any]:
    """parse_rank_table on ``data`` and on its item-by-item twin: the table, or the error's where and text."""
    results = []
    for variant in (data, item_by_item(data)):
        try:
            results.append(parse_rank_table(variant, "t.json"))
        except RankTableError as error:
            results.append((error.where, str(error)))
    return results[0], results[1]


@pytest.mark.parametrize("count", [*range(0, 260), 999, 1000, 1001, 32767, 32768, 100_001])
def test_decimals_is_the_numbers_joined(count: int) -> None:
    assert bulk._decimals(count) == ",".join(map(str, range(count)))


@given(st.integers(min_value=0, max_value=40_000), st.integers(min_value=0, max_value=1_000))
def test_decimals_from_any_first_number_is_the_numbers_joined(first: int, count: int) -> None:
    assert bulk._decimals(count, first) == ",".join(map(str, range(first, first + count)))


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["0", "1", "2"], True),
        ([], True),
        (["0", "2", "1"], False),
        (["0", "1,2"], False),  # same text as "0", "1", "2" once joined, but two values
        (["0,1", "2"], False),
        (["0", "01"], False),  # a padded rank is valid but is not the canonical text: item by item
        (["1", "2"], False),
        (["0", "1", "2", "3"][:3], True),
    ],
)
def test_counts_up(values: list[str], expected: bool) -> None:
    assert bulk._counts_up(",".join(values), len(values)) is expected


def test_device_ids_valid_checks_each_server_when_sizes_differ() -> None:
    # 16 + 15 + 17 devices: the column is the first server's 16 ids three times, but server 2 holds "15" twice.
    ids = [str(i) for i in range(16)] * 3
    assert not bulk._device_ids_valid(ids, [0, 16, 31, 48])
    assert bulk._device_ids_valid(ids, [0, 16, 32, 48])
    assert not bulk._device_ids_valid(ids[:32], [0, 15, 32])
    assert not bulk._device_ids_valid(ids, [0, 48])  # one server with every id three times


def test_device_ids_valid_when_servers_list_ids_in_different_orders() -> None:
    ids = ["0", "1", "1", "0", "0", "1"]
    assert bulk._device_ids_valid(ids, [0, 2, 4, 6])
    assert not bulk._device_ids_valid(ids, [0, 2, 3, 6])
    assert not bulk._device_ids_valid(["0", "1", "1", "1"], [0, 2, 4])
    assert not bulk._device_ids_valid(["0", "1", "07", "1"], [0, 2, 4])  # not canonical: item by item
    with pytest.raises(TypeError):  # unhashable: the caller goes item by item
        bulk._device_ids_valid(["0", ["1"]], [0, 2])


def test_in_order_table_keeps_a_range_of_ranks_and_matches_item_by_item() -> None:
    data = v10_table(64, 8)
    fast, slow = both(data)
    assert fast == slow and fast.rank_size == 512
    assert isinstance(fast.servers[0].columns[2], range)
    assert [d.rank_id for d in fast.servers[5].devices] == list(range(40, 48))


def test_ranks_out_of_file_order_are_sorted_by_lowest_rank() -> None:
    data = v10_table(8, 4)
    data["server_list"].reverse()
    fast, slow = both(data)
    assert fast == slow
    assert [s.server_id for s in fast.servers] == [f"127.0.0.{i}" for i in range(1, 9)]
    assert [d.rank_id for d in fast.servers[2].devices] == [8, 9, 10, 11]


def test_servers_with_different_device_counts_and_orders() -> None:
    data = v10_table(3, 4)
    servers = data["server_list"]
    servers[1]["device"] = servers[1]["device"][:2]  # ranks 4, 5; then 8..11 leave a gap
    for rank, device in enumerate(d for s in servers for d in s["device"]):
        device["rank_id"] = str(rank)
    servers[2]["device"].reverse()
    fast, slow = both(data)
    assert fast == slow and fast.rank_size == 10
    assert [d.device_id for d in fast.servers[2].devices] == ["3", "2", "1", "0"]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_columns_added_part_by_part_give_the_item_by_item_servers(data: st.DataObject) -> None:
    """As the part-by-part reader adds them: where every server lists the same ids the column holds only the first
    server's id strings; a server listing them otherwise, in any part, gives the column as listed from there on."""
    servers, size = data.draw(st.integers(min_value=1, max_value=6)), data.draw(st.integers(min_value=1, max_value=4))
    table = v10_table(servers, size)
    listed = table["server_list"]
    reordered = data.draw(st.sets(st.integers(min_value=0, max_value=servers - 1), max_size=2))
    for index in reordered:  # its ids in reverse order, its ranks still in file order
        devices = listed[index]["device"]
        for device, device_id in zip(devices, [str(d) for d in reversed(range(size))]):
            device["device_id"] = device_id
    cuts = sorted(data.draw(st.sets(st.integers(min_value=1, max_value=max(1, servers - 1))))) if servers > 1 else []
    columns = bulk.ServerColumns()
    for start, end in zip([0, *cuts], [*cuts, servers]):
        assert columns.add(copy.deepcopy(listed[start:end]))
    parted = columns.servers()
    assert parted is not None and parted == parse_rank_table(item_by_item(table), "t.json").servers
    ids = parted[0].columns[0]
    if not reordered or size == 1:
        assert all(ids[i] is ids[i % size] for i in range(len(ids)))  # the first server's strings, repeated


@pytest.mark.parametrize(
    ("server", "device", "key", "value", "where"),
    [
        (1, 2, "device_id", "1", "server_list[1].device[2].device_id"),  # duplicate on one server only
        (3, 0, "device_id", "1024", None),  # valid, but beyond the small ids the fast path knows
        (2, 1, "rank_id", "0", "server_list[2].device[1].rank_id"),  # duplicate rank
        (2, 1, "rank_id", "99", "server_list[2].device[1].rank_id"),  # rank out of range
        (0, 3, "rank_id", "3,4", "server_list[0].device[3].rank_id"),  # a comma inside a rank
        (3, 1, "device_id", "01", None),  # valid, read as "1"; not canonical, so item by item
        (3, 0, "device_id", "01", "server_list[3].device[1].device_id"),  # "01" is "1", which device 1 has
        (1, 1, "device_ip", None, None),  # a null device_ip is valid; only the fast path refuses it
    ],
)
def test_a_flaw_on_one_device_gives_the_item_by_item_answer(
    server: int, device: int, key: str, value: object, where: Optional[str]
) -> None:
    data = v10_table(4, 4)
    data["server_list"][server]["device"][device][key] = value
    fast, slow = both(data)
    assert fast == slow
    if where is None:
        assert isinstance(fast, RankTable)
    else:
        assert fast[0] == where, fast


def v0_table(pods: int, devices: int) -> dict[str, Any]:
    """A v0 (``pod_name``, no ``rank_id``) table, pods listed in reverse order of their number."""
    return {"status": "completed", "group_list": [{"group_name": "job", "instance_list": [
        {"pod_name": f"job-pod-{p}", "server_id": f"10.0.{p // 250}.{p % 250}",
         "devices": [{"device_id": str(d), "device_ip": f"192.168.{p % 250}.{d}"} for d in range(devices)]}
        for p in reversed(range(pods))]}]}


def test_v0_conversion_reads_back_as_the_same_devices() -> None:
    data = v0_table(300, 4)
    data["group_list"][0]["instance_list"][7]["server_id"] = 'odd "id" \\ é'  # quoted and escaped in the text
    del data["group_list"][0]["instance_list"][3]["devices"][1]["device_ip"]
    table = parse_rank_table(data, "t.json")
    converted = parse_rank_table(json.loads(to_v1_text(table)), "v1.json")
    assert converted.format == "1.0" and converted.rank_size == 1200
    assert [(s.server_id, s.devices) for s in converted.servers] == [(s.server_id, s.devices) for s in table.servers]
    assert converted.servers[0].server_id == "10.0.0.0" and converted.servers[0].devices[0].rank_id == 0


def parse_both_ways(data: dict[str, Any]) -> tuple[Any, Any]:
    """parse_rank_table with its bulk path and with the bulk path switched off: tables, or (where, message)."""
    results = []
    for fast in (True, False):
        with contextlib.ExitStack() as stack:
            if not fast:
                stack.enter_context(mock.patch.object(_parse, "fast_server_list", lambda listed: None))
            try:
                results.append(parse_rank_table(data, "t.json"))
            except RankTableError as error:
                results.append((error.where, str(error)))
    return results[0], results[1]


ID_VALUES = st.sampled_from(["0", "1", "2", "3", "01", "1023", "1024", "", " 1", 2, None, "x", ["1"]])
RANK_STRINGS = st.sampled_from(["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "007", "1,2", "", 3])


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.data())
def test_bulk_and_item_by_item_paths_agree_on_random_tables(data: st.DataObject) -> None:
    servers = data.draw(st.integers(min_value=1, max_value=4))
    sizes = [data.draw(st.integers(min_value=1, max_value=4)) for _ in range(servers)]
    total = sum(sizes)
    order = data.draw(st.permutations(range(total))) if data.draw(st.booleans()) else list(range(total))
    ranks: list[Any] = [str(rank) for rank in order]
    for _ in range(data.draw(st.integers(min_value=0, max_value=2))):  # a few odd rank values
        ranks[data.draw(st.integers(min_value=0, max_value=total - 1))] = data.draw(RANK_STRINGS)
    ids_mode = data.draw(st.sampled_from(["per server", "tiled", "random"]))
    tile = [str(d) for d in range(sizes[0])] * total  # the first server's ids repeated over the whole column
    table: dict[str, Any] = {"version": "1.0", "status": "completed", "server_list": []}
    flat = 0
    for s, size in enumerate(sizes):
        devices = []
        for d in range(size):
            device_id = {"per server": str(d), "tiled": tile[flat]}.get(ids_mode) or data.draw(ID_VALUES)
            devices.append({"device_id": device_id, "device_ip": f"192.0.{s}.{d}", "rank_id": ranks[flat]})
            flat += 1
        table["server_list"].append({"server_id": f"10.0.0.{s}", "device": devices})
    fast, slow = parse_both_ways(table)
    assert fast == slow
