"""Tests for malaunch.entrypoint.plan.rank_table: formats, files, waiting, server selection, validation."""

from __future__ import annotations

import copy
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
from malaunch.entrypoint.contract.errors import ConfigError, RankTableError, WaitTimeout, exit_code_for
from malaunch.entrypoint.plan.rank_table import (
    RANK_TABLE_DIR_FILE,
    RankTable,
    RankTableNotReady,
    parse_rank_table,
    read_rank_table,
    resolve_rank_table_path,
    select_server,
    wait_for_rank_table,
)

DATA = Path(__file__).parents[1] / "data" / "ranktables"


def v1_table(servers: int = 2, devices: int = 4, version: str = "1.0") -> dict[str, Any]:
    """A valid v1.x table as a dict, all values strings as in real files."""
    return {
        "version": version,
        "server_count": str(servers),
        "status": "completed",
        "server_list": [
            {
                "server_id": f"10.0.0.{s + 1}",
                "host_nic_ip": "reserve",
                "device": [
                    {"device_id": str(d), "device_ip": f"192.168.{s}.{d}", "rank_id": str(s * devices + d)}
                    for d in range(devices)
                ],
            }
            for s in range(servers)
        ],
    }


def write_json(path: Path, data: object) -> str:
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def layout(table: RankTable) -> list[tuple[str, Optional[str], list[tuple[str, int]]]]:
    return [(s.server_id, s.pod_name, [(d.device_id, d.rank_id) for d in s.devices]) for s in table.servers]


def select(table: RankTable, host_ip: Optional[str] = None, instance_name: Optional[str] = None,
           node_rank: Optional[int] = None, num_hosts: int = 1) -> int:
    return select_server(table, host_ip=host_ip, instance_name=instance_name, node_rank=node_rank,
                         num_hosts=num_hosts)


# ------------------------------------------------------------------------------------------------ formats


def test_v1_0_sample() -> None:
    table = read_rank_table(str(DATA / "v1_0_2x4.json"))
    assert (table.format, table.status, table.rank_size) == ("1.0", "completed", 8)
    assert table.path == str(DATA / "v1_0_2x4.json")
    assert layout(table) == [
        ("10.155.111.140", None, [("0", 0), ("1", 1), ("2", 2), ("3", 3)]),
        ("10.155.111.141", None, [("0", 4), ("1", 5), ("2", 6), ("3", 7)]),
    ]
    assert table.servers[1].devices[2].device_ip == "192.3.27.7"
    assert table.servers[0].host_ip is None


def test_v1_2_sample_with_super_pod_list() -> None:
    table = read_rank_table(str(DATA / "v1_2_superpod.json"))
    assert (table.format, table.rank_size) == ("1.2", 4)
    hosts = [(s.server_id, s.host_ip) for s in table.servers]
    assert hosts == [("node_0", "172.16.0.100"), ("node_1", "172.16.0.101")]
    assert layout(table)[1][2] == [("0", 2), ("1", 3)]
    assert table.servers[0].devices[1].device_ip == "192.168.1.8"


def test_legacy_group_list_sample_groups_instances_by_server() -> None:
    table = read_rank_table(str(DATA / "legacy_group_list.json"))
    assert (table.format, table.rank_size) == ("group_list", 8)
    assert layout(table) == [
        ("10.0.0.1", None, [("0", 0), ("1", 1), ("2", 2), ("3", 3)]),
        ("10.0.0.2", None, [("0", 4), ("1", 5), ("2", 6), ("3", 7)]),
    ]


def test_v0_sample_orders_pods_by_numeric_suffix() -> None:
    table = read_rank_table(str(DATA / "v0_jobstart_hccl.json"))
    assert (table.format, table.rank_size) == ("v0", 6)
    assert layout(table) == [
        ("10.19.1.79", "job-pod-1", [("0", 0), ("1", 1)]),
        ("10.19.1.80", "job-pod-2", [("4", 2), ("5", 3)]),
        ("10.19.1.90", "job-pod-10", [("0", 4), ("1", 5)]),
    ]


def test_integer_values_and_padded_ids_parse_like_strings() -> None:
    as_strings = parse_rank_table(v1_table(), "t.json")
    data = v1_table()
    for server in data["server_list"]:
        for device in server["device"]:
            device["device_id"] = int(device["device_id"])
            device["rank_id"] = int(device["rank_id"])
    data["server_list"][0]["device"][1]["device_id"] = "01"
    data["server_count"] = 2
    assert parse_rank_table(data, "t.json") == as_strings


def test_servers_are_ordered_by_lowest_rank_and_devices_keep_file_order() -> None:
    data = v1_table()
    data["server_list"].reverse()
    data["server_list"][0]["device"].reverse()  # now the server of ranks 4..7, listed 7, 6, 5, 4
    table = parse_rank_table(data, "t.json")
    assert [s.server_id for s in table.servers] == ["10.0.0.1", "10.0.0.2"]
    assert [d.rank_id for d in table.servers[1].devices] == [7, 6, 5, 4]


def test_legacy_instance_with_several_devices_gets_consecutive_ranks() -> None:
    data: dict[str, Any] = {"status": "completed", "group_list": [{"instance_list": [
        {"server_id": "h1", "rank_id": "0", "devices": [{"device_id": "0"}, {"device_id": "1"}]},
        {"server_id": "h2", "rank_id": "2", "devices": [{"device_id": "0"}, {"device_id": "1"}]},
    ]}]}
    table = parse_rank_table(data, "t.json")
    assert layout(table) == [("h1", None, [("0", 0), ("1", 1)]), ("h2", None, [("0", 2), ("1", 3)])]
    assert table.servers[0].devices[0].device_ip is None
    data["group_list"][0]["instance_list"][1]["rank_id"] = "1"  # overlaps rank 1 of h1
    with pytest.raises(RankTableError) as caught:
        parse_rank_table(data, "t.json")
    assert "group_list[0].instance_list[" in caught.value.where and "unique" in str(caught.value)


def test_float_version_is_accepted() -> None:
    data = v1_table()
    data["version"] = 1.0
    assert parse_rank_table(data, "t.json").format == "1.0"


# ------------------------------------------------------------------------------------------------ files


def test_rank_table_file_may_be_a_directory_holding_jobstart_hccl(tmp_path: Path) -> None:
    folder = tmp_path / "rank_table"
    folder.mkdir()
    (folder / RANK_TABLE_DIR_FILE).write_bytes((DATA / "v1_0_2x4.json").read_bytes())
    resolved = resolve_rank_table_path(str(folder))
    assert resolved == str(folder / RANK_TABLE_DIR_FILE)
    assert read_rank_table(resolved).rank_size == 8


def test_resolve_keeps_files_and_trusts_a_trailing_slash(tmp_path: Path) -> None:
    file = write_json(tmp_path / "hccl.json", v1_table())
    assert resolve_rank_table_path(file) == file
    missing = str(tmp_path / "not-yet") + "/"
    assert resolve_rank_table_path(missing) == str(tmp_path / "not-yet" / RANK_TABLE_DIR_FILE)
    assert resolve_rank_table_path("/x/y", is_dir=lambda p: p == "/x/y") == "/x/y/" + RANK_TABLE_DIR_FILE
    with pytest.raises(ConfigError) as caught:
        resolve_rank_table_path("  ")
    assert "RANK_TABLE_FILE" in str(caught.value)


def test_read_a_directory_is_an_error_not_a_wait(tmp_path: Path) -> None:
    with pytest.raises(RankTableError) as caught:
        read_rank_table(str(tmp_path))
    assert RANK_TABLE_DIR_FILE in str(caught.value)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "does not exist"),
        (b"", "empty"),
        (b"  \n", "empty"),
        (b'{"status": "completed", "version": "1.0", "server_list": [{"server_id"', "not complete JSON"),
        (b'{"status": "completed", "version": "1.0", "server_list": [{"server_id": "10.0.0.1", "dev', "not complete"),
        (b'{"status": "completed", "server_count": 1', "not complete JSON"),
        (b'{"status": "completed", "server_count": 1.', "not complete JSON"),
        (b'{"status": "completed", "server_count": 1e', "not complete JSON"),
        (b'{"status": "completed", "server_count": -', "not complete JSON"),
        (b'{"status": "completed", "x": tr', "not complete JSON"),
        (b'{"status": "completed", "x": "\\u00', "not complete JSON"),
        (b'{"status": "completed", "x": "caf\xc3', "UTF-8 character"),
        (b'{"status": "initializing", "server_list": []}', "initializing"),
        (b'{"status": "initializing"}', "initializing"),
    ],
)
def test_not_ready_files(tmp_path: Path, content: Optional[bytes], reason: str) -> None:
    path = tmp_path / "hccl.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(RankTableNotReady) as caught:
        read_rank_table(str(path))
    assert reason in caught.value.reason


def test_every_truncation_of_a_sample_is_not_ready(tmp_path: Path) -> None:
    raw = (DATA / "v1_2_superpod.json").read_bytes().rstrip()
    path = tmp_path / "hccl.json"
    for cut in range(0, len(raw), 7):
        path.write_bytes(raw[:cut])
        with pytest.raises(RankTableNotReady):
            read_rank_table(str(path))
    path.write_bytes(raw)
    assert read_rank_table(str(path)).rank_size == 4


def test_completed_but_malformed_file_is_an_error(tmp_path: Path) -> None:
    data = v1_table()
    data["server_list"][1]["device"][2]["rank_id"] = "x"
    path = write_json(tmp_path / "hccl.json", data)
    with pytest.raises(RankTableError) as caught:
        read_rank_table(path)
    assert caught.value.path == path and caught.value.where == "server_list[1].device[2].rank_id"
    assert exit_code_for(caught.value) == 2


# ------------------------------------------------------------------------------------------------ waiting


class FakeTime:
    """Injectable clock: ``sleep`` advances ``now`` and runs an optional hook (to change the file)."""

    def __init__(self, hook: Optional[Callable[[float], None]] = None) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []
        self.hook = hook

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.hook is not None:
            self.hook(self.now)


def test_wait_logic_polls_until_deadline_and_reports_progress(short_tmp: Path) -> None:
    path = write_json(short_tmp / "hccl.json", {"status": "initializing"})  # the whole path is in the message
    fake = FakeTime()
    reports: list[tuple[str, float]] = []
    with pytest.raises(WaitTimeout) as caught:
        wait_for_rank_table(path, timeout=25, poll_interval=0.5, clock=fake.clock, sleep=fake.sleep,
                            on_wait=lambda reason, elapsed: reports.append((reason, elapsed)))
    assert sum(fake.sleeps) == pytest.approx(25) and max(fake.sleeps) <= 0.5
    assert [elapsed for _, elapsed in reports] == pytest.approx([0, 10, 20])
    assert all("initializing" in reason for reason, _ in reports)
    error = caught.value
    assert error.waited == pytest.approx(25)
    assert "initializing" in error.hint and "MALAUNCH_RANK_TABLE_TIMEOUT" in error.hint
    assert path in str(error) and "'completed'" in str(error)


def test_wait_last_sleep_stops_at_the_deadline(tmp_path: Path) -> None:
    fake = FakeTime()
    with pytest.raises(WaitTimeout):
        wait_for_rank_table(str(tmp_path / "missing.json"), timeout=1.2, poll_interval=0.5, clock=fake.clock,
                            sleep=fake.sleep)
    assert fake.sleeps == pytest.approx([0.5, 0.5, 0.2])


def test_wait_timeout_zero_is_a_single_read(tmp_path: Path) -> None:
    fake = FakeTime()
    with pytest.raises(WaitTimeout) as caught:
        wait_for_rank_table(str(tmp_path / "missing.json"), timeout=0, clock=fake.clock, sleep=fake.sleep)
    assert fake.sleeps == []
    assert "does not exist" in caught.value.hint
    write_json(tmp_path / "present.json", v1_table())
    assert wait_for_rank_table(str(tmp_path / "present.json"), timeout=0, sleep=fake.sleep).rank_size == 8


def test_wait_returns_once_the_file_appears(tmp_path: Path) -> None:
    target = tmp_path / "hccl.json"

    def appear(now: float) -> None:
        if now >= 103 and not target.exists():
            write_json(target, v1_table())

    fake = FakeTime(appear)
    reasons: list[str] = []
    table = wait_for_rank_table(str(target), timeout=60, poll_interval=1, clock=fake.clock, sleep=fake.sleep,
                                on_wait=lambda reason, _elapsed: reasons.append(reason))
    assert table.rank_size == 8 and len(fake.sleeps) == 3
    assert reasons == ["the file does not exist yet"]


def test_wait_does_not_retry_a_malformed_completed_table(tmp_path: Path) -> None:
    data = v1_table()
    data["server_count"] = "5"
    fake = FakeTime()
    with pytest.raises(RankTableError) as caught:
        wait_for_rank_table(write_json(tmp_path / "hccl.json", data), timeout=60, clock=fake.clock,
                            sleep=fake.sleep)
    assert caught.value.where == "server_count" and fake.sleeps == []


@pytest.mark.parametrize(("timeout", "poll"), [(-1.0, 0.5), (float("nan"), 0.5), (5.0, 0.0)])
def test_wait_rejects_bad_arguments(tmp_path: Path, timeout: float, poll: float) -> None:
    with pytest.raises(ValueError):
        wait_for_rank_table(str(tmp_path / "x.json"), timeout=timeout, poll_interval=poll)


def run_writer(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_wait_sees_an_atomic_rewrite_from_another_thread(tmp_path: Path) -> None:
    path = tmp_path / "hccl.json"
    initial = v1_table()
    initial["status"] = "initializing"
    initial["server_list"] = []
    write_json(path, initial)

    def complete() -> None:
        time.sleep(0.3)
        write_json(tmp_path / "hccl.json.tmp", v1_table())
        os.replace(tmp_path / "hccl.json.tmp", path)

    thread = run_writer(complete)
    try:
        table = wait_for_rank_table(str(path), timeout=30, poll_interval=0.05)
    finally:
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert table.status == "completed" and table.rank_size == 8


def test_wait_treats_half_written_json_as_not_ready(tmp_path: Path) -> None:
    path = tmp_path / "hccl.json"
    full = json.dumps(v1_table()).encode()
    path.write_bytes(full[: len(full) // 2])  # a writer caught mid-way, not using rename
    seen: list[str] = []

    def finish() -> None:
        time.sleep(0.3)
        path.write_bytes(full)

    thread = run_writer(finish)
    try:
        table = wait_for_rank_table(str(path), timeout=30, poll_interval=0.05,
                                    on_wait=lambda reason, _elapsed: seen.append(reason))
    finally:
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert table.rank_size == 8 and "not complete JSON" in seen[0]


def test_wait_follows_a_configmap_style_symlink_swap(tmp_path: Path) -> None:
    """Kubernetes swaps a ``..data`` symlink to a new timestamped directory; the file path stays the same."""
    first = tmp_path / "..2026_01_01_00_00_00.1"
    first.mkdir()
    write_json(first / "hccl.json", {"status": "initializing"})
    (tmp_path / "..data").symlink_to(first.name)
    (tmp_path / "hccl.json").symlink_to("..data/hccl.json")

    def swap() -> None:
        time.sleep(0.3)
        second = tmp_path / "..2026_01_01_00_00_05.2"
        second.mkdir()
        write_json(second / "hccl.json", v1_table(servers=1, devices=8))
        (tmp_path / "..data_tmp").symlink_to(second.name)
        os.replace(tmp_path / "..data_tmp", tmp_path / "..data")

    thread = run_writer(swap)
    try:
        table = wait_for_rank_table(str(tmp_path / "hccl.json"), timeout=30, poll_interval=0.05)
    finally:
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert table.rank_size == 8 and len(table.servers) == 1


def test_wait_for_a_table_that_never_completes_times_out_with_the_reason(tmp_path: Path) -> None:
    path = write_json(tmp_path / "hccl.json", {"status": "initializing", "group_list": []})
    with pytest.raises(WaitTimeout) as caught:
        wait_for_rank_table(path, timeout=1.0, poll_interval=0.1)
    assert caught.value.waited >= 1.0
    assert "status is 'initializing'" in caught.value.hint
    assert exit_code_for(caught.value) == 3


# ------------------------------------------------------------------------------------------------ selection


def test_select_by_host_ip_matches_server_id() -> None:
    table = read_rank_table(str(DATA / "v1_0_2x4.json"))
    assert select(table, host_ip="10.155.111.141", node_rank=0, num_hosts=2) == 1


def test_select_by_host_ip_matches_host_ip_field() -> None:
    table = read_rank_table(str(DATA / "v1_2_superpod.json"))
    assert select(table, host_ip="172.16.0.101", num_hosts=2) == 1
    assert select(table, host_ip="node_0", num_hosts=2) == 0


def test_select_by_pod_name() -> None:
    table = read_rank_table(str(DATA / "v0_jobstart_hccl.json"))
    assert select(table, instance_name="job-pod-10", num_hosts=3) == 2
    assert select(table, host_ip="10.19.1.80", instance_name="job-pod-2", num_hosts=3) == 1


def test_select_pod_name_on_another_ip_is_an_error() -> None:
    table = read_rank_table(str(DATA / "v0_jobstart_hccl.json"))
    with pytest.raises(RankTableError) as caught:
        select(table, host_ip="10.19.1.79", instance_name="job-pod-10", num_hosts=3)
    assert "10.19.1.90" in str(caught.value) and "job-pod-10" in str(caught.value)


def test_select_by_node_rank_when_the_table_has_num_hosts_servers() -> None:
    table = read_rank_table(str(DATA / "legacy_group_list.json"))
    assert select(table, node_rank=1, num_hosts=2) == 1
    assert select(table, host_ip="172.31.9.9", node_rank=0, num_hosts=2) == 0  # unknown IP: task index


def test_select_single_server() -> None:
    table = parse_rank_table(v1_table(servers=1, devices=8), "t.json")
    assert select(table, host_ip=None, node_rank=3, num_hosts=4) == 0


def test_select_ambiguous_ip_settled_by_node_rank_or_rejected() -> None:
    data = json.loads((DATA / "v0_jobstart_hccl.json").read_text())
    for instance in data["group_list"][0]["instance_list"]:
        instance["server_id"] = "10.19.1.79"  # three pods on one node
    table = parse_rank_table(data, "t.json")
    assert select(table, host_ip="10.19.1.79", node_rank=2, num_hosts=3) == 2
    with pytest.raises(RankTableError) as caught:
        select(table, host_ip="10.19.1.79", num_hosts=3)
    message = str(caught.value)
    assert "job-pod-1" in message and "job-pod-10" in message and "MA_CURRENT_INSTANCE_NAME" in message


def test_select_no_match_names_what_was_sought_and_the_candidates() -> None:
    table = read_rank_table(str(DATA / "v1_0_2x4.json"))
    with pytest.raises(RankTableError) as caught:
        select(table, host_ip="10.9.9.9", instance_name="job-pod-7", node_rank=2, num_hosts=3)
    message = str(caught.value)
    for text in ("MA_CURRENT_HOST_IP=10.9.9.9", "MA_CURRENT_INSTANCE_NAME=job-pod-7", "VC_TASK_INDEX=2",
                 "10.155.111.140", "10.155.111.141", str(DATA / "v1_0_2x4.json")):
        assert text in message
    assert caught.value.where == "server_list"


def test_select_no_match_lists_a_bounded_number_of_candidates() -> None:
    table = parse_rank_table(v1_table(servers=20, devices=1), "t.json")
    with pytest.raises(RankTableError) as caught:
        select(table, host_ip="10.9.9.9", num_hosts=2)
    assert "and 12 more" in str(caught.value) and "10.0.0.20" not in str(caught.value)


# ------------------------------------------------------------------------------------------------ malformed


def legacy_table() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "legacy_group_list.json").read_text())
    return data


def v0_table() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "v0_jobstart_hccl.json").read_text())
    return data


def v12_table() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "v1_2_superpod.json").read_text())
    return data


def _set(path: str, value: object) -> Callable[[Any], Any]:
    """A mutation that sets ``path`` (dots and [i]) to ``value``; ``...`` deletes it."""

    def mutate(data: Any) -> Any:
        parts = path.replace("[", ".").replace("]", "").split(".")
        node = data
        for part in parts[:-1]:
            node = node[int(part)] if part.isdigit() else node[part]
        last: Any = int(parts[-1]) if parts[-1].isdigit() else parts[-1]
        if value is ...:
            del node[last]
        else:
            node[last] = value
        return data

    return mutate


MALFORMED: list[tuple[str, Callable[[], Any], Callable[[Any], Any], str, str]] = [
    # (id, base table, mutation, expected where, text that must appear in the message)
    ("top-level-list", v1_table, lambda d: [d], "(top level)", "JSON object"),
    ("status-missing", v1_table, _set("status", ...), "status", "None"),
    ("status-not-string", v1_table, _set("status", 1), "status", "=1 "),
    ("unknown-version", v1_table, _set("version", "2.0"), "version", "'2.0'"),
    ("no-version-no-group-list", v1_table, _set("version", ...), "version", "group_list"),
    ("server-list-empty", v1_table, _set("server_list", []), "server_list", "non-empty"),
    ("server-list-object", v1_table, _set("server_list", {"a": 1}), "server_list", "{'a': 1}"),
    ("server-not-object", v1_table, _set("server_list[1]", "10.0.0.2"), "server_list[1]", "'10.0.0.2'"),
    ("server-count-wrong", v1_table, _set("server_count", "3"), "server_count", "'3'"),
    ("server-count-junk", v1_table, _set("server_count", "two"), "server_count", "'two'"),
    ("server-id-missing", v1_table, _set("server_list[0].server_id", ...), "server_list[0].server_id",
     "None"),
    ("server-id-empty", v1_table, _set("server_list[0].server_id", " "), "server_list[0].server_id", "' '"),
    ("server-id-duplicate", v1_table, _set("server_list[1].server_id", "10.0.0.1"),
     "server_list[1].server_id", "server_list[0]"),
    ("device-list-empty", v1_table, _set("server_list[1].device", []), "server_list[1].device", "[]"),
    ("device-list-missing", v1_table, _set("server_list[1].device", ...), "server_list[1].device", "None"),
    ("device-not-object", v1_table, _set("server_list[0].device[2]", 2), "server_list[0].device[2]", "=2 "),
    ("device-id-negative", v1_table, _set("server_list[0].device[1].device_id", "-1"),
     "server_list[0].device[1].device_id", "'-1'"),
    ("device-id-word", v1_table, _set("server_list[0].device[1].device_id", "npu1"),
     "server_list[0].device[1].device_id", "'npu1'"),
    ("device-id-float", v1_table, _set("server_list[0].device[1].device_id", 1.5),
     "server_list[0].device[1].device_id", "1.5"),
    ("device-id-bool", v1_table, _set("server_list[0].device[1].device_id", True),
     "server_list[0].device[1].device_id", "True"),
    ("device-id-duplicate", v1_table, _set("server_list[0].device[3].device_id", "0"),
     "server_list[0].device[3].device_id", "server_list[0].device[0]"),
    ("device-ip-number", v1_table, _set("server_list[1].device[0].device_ip", 7),
     "server_list[1].device[0].device_ip", "=7 "),
    ("rank-missing", v1_table, _set("server_list[1].device[0].rank_id", ...),
     "server_list[1].device[0].rank_id", "None"),
    ("rank-word", v1_table, _set("server_list[1].device[0].rank_id", "four"),
     "server_list[1].device[0].rank_id", "'four'"),
    ("rank-negative-int", v1_table, _set("server_list[1].device[0].rank_id", -4),
     "server_list[1].device[0].rank_id", "-4"),
    ("rank-with-space", v1_table, _set("server_list[1].device[0].rank_id", " 4"),
     "server_list[1].device[0].rank_id", "' 4'"),
    ("rank-duplicate", v1_table, _set("server_list[1].device[0].rank_id", "3"),
     "server_list[1].device[0].rank_id", "server_list[0].device[3].rank_id"),
    ("rank-gap", v1_table, _set("server_list[1].device[3].rank_id", "99"),
     "server_list[1].device[3].rank_id", "0..7"),
    ("host-ip-number", v12_table, _set("server_list[0].host_ip", 5), "server_list[0].host_ip", "=5 "),
    ("super-pod-list-object", v12_table, _set("super_pod_list", {}), "super_pod_list", "{}"),
    ("super-pod-member-no-id", v12_table, _set("super_pod_list[0].server_list[1]", {}),
     "super_pod_list[0].server_list[1].server_id", "None"),
    ("super-pod-id-word", v12_table, _set("super_pod_list[0].super_pod_id", "a"),
     "super_pod_list[0].super_pod_id", "'a'"),
    ("group-list-empty", legacy_table, _set("group_list", []), "group_list", "[]"),
    ("instance-list-missing", legacy_table, _set("group_list[0].instance_list", ...),
     "group_list[0].instance_list", "None"),
    ("legacy-rank-missing-on-one", legacy_table, _set("group_list[0].instance_list[3].rank_id", ...),
     "group_list[0].instance_list[3].rank_id", "group_list[0].instance_list[0]"),
    ("legacy-rank-duplicate", legacy_table, _set("group_list[0].instance_list[5].rank_id", "2"),
     "group_list[0].instance_list[5].rank_id", "unique"),
    ("legacy-device-twice-on-server", legacy_table,
     _set("group_list[0].instance_list[1].devices[0].device_id", "0"),
     "group_list[0].instance_list[1].devices[0].device_id", "10.0.0.1"),
    ("legacy-devices-empty", legacy_table, _set("group_list[0].instance_list[1].devices", []),
     "group_list[0].instance_list[1].devices", "[]"),
    ("v0-pod-name-missing", v0_table, _set("group_list[0].instance_list[0].pod_name", ...),
     "group_list[0].instance_list[0].pod_name", "None"),
    ("v0-rank-on-one", v0_table, _set("group_list[0].instance_list[2].rank_id", "0"),
     "group_list[0].instance_list[2].rank_id", "pod_name order"),
    ("v0-device-duplicate", v0_table, _set("group_list[0].instance_list[0].devices[1].device_id", "0"),
     "group_list[0].instance_list[0].devices[1].device_id", "once per server"),
]


@pytest.mark.parametrize(("base", "mutate", "where", "shown"), [case[1:] for case in MALFORMED],
                         ids=[case[0] for case in MALFORMED])
def test_malformed_tables(
    base: Callable[[], Any], mutate: Callable[[Any], Any], where: str, shown: str
) -> None:
    data = mutate(copy.deepcopy(base()))
    with pytest.raises(RankTableError) as caught:
        parse_rank_table(data, "/user/config/jobstart_hccl.json")
    error = caught.value
    message = str(error)
    assert error.where == where, message
    assert message.startswith(f"rank table /user/config/jobstart_hccl.json: {where}=")
    assert shown in message and "expected" in message
    assert isinstance(error, ConfigError) and error.variable == "RANK_TABLE_FILE"


def test_sample_tables_are_valid_before_mutation() -> None:
    for base in (v1_table, legacy_table, v0_table, v12_table):
        parse_rank_table(base(), "t.json")


def test_huge_values_are_shortened_in_messages() -> None:
    data = v1_table()
    data["server_list"][0]["server_id"] = [list(range(1000))] * 1000
    with pytest.raises(RankTableError) as caught:
        parse_rank_table(data, "t.json")
    assert len(str(caught.value)) < 300
