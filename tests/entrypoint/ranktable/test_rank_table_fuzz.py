"""Property tests for malaunch.entrypoint.plan.rank_table: garbage in gives RankTableError/RankTableNotReady only.

Three sources of input: arbitrary JSON-like values (biased towards rank-table keys), valid sample tables with
random mutations, and arbitrary bytes in a file. Tables that do parse are checked against the invariants the
module promises (ranks 0..N-1 once each, device ids unique per server, servers in rank order).
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from malaunch.entrypoint.contract.errors import RankTableError
from malaunch.entrypoint.plan.rank_table import RankTable, RankTableNotReady, parse_rank_table, read_rank_table

pytestmark = pytest.mark.slow  # searches of many examples

DATA = Path(__file__).parents[1] / "data" / "ranktables"
SAMPLES = {path.name: json.loads(path.read_text()) for path in sorted(DATA.glob("*.json"))}
KEYS = ["status", "version", "server_count", "server_list", "server_id", "host_ip", "device", "device_id",
        "device_ip", "rank_id", "super_pod_list", "super_pod_id", "group_list", "instance_list", "devices",
        "pod_name", "host_nic_ip"]
WORDS = ["completed", "initializing", "1.0", "1.2", "0", "1", "7", "-1", "01", "", " ", "job-pod-3", "pod",
         "10.0.0.1", "\u0661"]  # an Arabic-Indic digit: isdigit() but not ASCII

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-2, max_value=40)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12) | st.sampled_from(WORDS))
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), children, max_size=6),
    max_leaves=40,
)


def check_invariants(table: RankTable) -> None:
    ranks = [device.rank_id for server in table.servers for device in server.devices]
    assert sorted(ranks) == list(range(table.rank_size))
    assert table.format in ("group_list", "v0", "1.0", "1.2")
    firsts = [min(device.rank_id for device in server.devices) for server in table.servers]
    assert firsts == sorted(firsts)
    for server in table.servers:
        assert server.devices and server.server_id.strip()
        ids = [device.device_id for device in server.devices]
        assert len(set(ids)) == len(ids)
        assert all(device_id == str(int(device_id)) for device_id in ids)


def parse_or_error(data: object) -> None:
    try:
        table = parse_rank_table(data, "fuzz.json")
    except RankTableError as error:
        assert str(error).startswith("rank table fuzz.json: ")
        assert len(str(error)) < 2000
    else:
        check_invariants(table)


@FUZZ
@given(json_values)
def test_arbitrary_values_only_raise_rank_table_error(data: object) -> None:
    parse_or_error(data)


@FUZZ
@given(st.fixed_dictionaries({"status": st.just("completed")}, optional={
    "version": st.sampled_from(["1.0", "1.2"]) | scalars,
    "server_list": json_values, "group_list": json_values, "server_count": scalars,
    "super_pod_list": json_values,
}))
def test_table_shaped_values_only_raise_rank_table_error(data: dict[str, Any]) -> None:
    parse_or_error(data)


def containers(node: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) slot in a decoded JSON document."""
    slots: list[tuple[Any, Any]] = []
    if isinstance(node, dict):
        for key, child in node.items():
            slots.append((node, key))
            slots.extend(containers(child))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            slots.append((node, index))
            slots.extend(containers(child))
    return slots


@st.composite
def mutated_tables(draw: st.DrawFn) -> Any:
    data = copy.deepcopy(SAMPLES[draw(st.sampled_from(sorted(SAMPLES)))])
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        slots = containers(data)
        if not slots:
            break
        parent, key = draw(st.sampled_from(slots))
        action = draw(st.sampled_from(["replace", "delete", "duplicate", "int", "retype", "swap"]))
        if action == "replace":
            parent[key] = draw(json_values)
        elif action == "delete":
            del parent[key]
        elif action == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
        elif action == "int" and isinstance(parent[key], str) and parent[key].isdigit():
            parent[key] = int(parent[key])
        elif action == "retype":  # same meaning, wrong JSON type
            value = parent[key]
            parent[key] = draw(st.sampled_from([True, False, 1.0, 0.0, [value], {"value": value}]))
        elif action == "swap" and isinstance(parent, list) and len(parent) > 1:
            parent[0], parent[-1] = parent[-1], parent[0]
    return data


@FUZZ
@given(mutated_tables())
def test_mutated_sample_tables_only_raise_rank_table_error(data: Any) -> None:
    parse_or_error(data)


def read_bytes(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "jobstart_hccl.json")
        with open(path, "wb") as handle:
            handle.write(raw)
        try:
            table = read_rank_table(path)
        except RankTableNotReady as not_ready:
            assert not_ready.reason
        except RankTableError:
            pass
        else:
            assert table.status == "completed"
            check_invariants(table)


@FUZZ
@given(st.binary(max_size=400))
def test_arbitrary_bytes_only_raise_not_ready_or_error(raw: bytes) -> None:
    read_bytes(raw)


@FUZZ
@given(st.sampled_from(sorted(SAMPLES)), st.data())
def test_corrupted_sample_files_only_raise_not_ready_or_error(name: str, data: st.DataObject) -> None:
    raw = bytearray((DATA / name).read_bytes())
    for _ in range(data.draw(st.integers(min_value=1, max_value=5))):
        position = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
        raw[position] = data.draw(st.integers(min_value=0, max_value=255))
    read_bytes(bytes(raw[: data.draw(st.integers(min_value=1, max_value=len(raw)))]))


@FUZZ
@given(st.sampled_from(sorted(SAMPLES)), st.data())
def test_fast_and_item_by_item_paths_agree(name: str, data: st.DataObject) -> None:
    """Numbers written as JSON ints or zero-padded take the item-by-item path; the result must not change."""
    table = SAMPLES[name]
    expected = parse_rank_table(table, "t.json")
    changed = copy.deepcopy(table)
    for parent, key in containers(changed):
        value = parent[key]
        if key in ("device_id", "rank_id", "server_count") and isinstance(value, str):
            parent[key] = data.draw(st.sampled_from([int(value), value, "0" + value]))
    assert parse_rank_table(changed, "t.json") == expected
