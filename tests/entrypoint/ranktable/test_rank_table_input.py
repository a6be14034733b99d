"""Rank-table files as the shim meets them: public samples, truncations (waited for) and files that can never
become a rank table (refused at once: FIFOs, devices, loops, oversize, not UTF-8, too deep, huge numbers)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Callable

import pytest
from malaunch.entrypoint.contract.errors import RankTableError, exit_code_for
from malaunch.entrypoint.plan.rank_table import (
    MAX_RANK_TABLE_BYTES,
    RankTableNotReady,
    read_rank_table,
    select_server,
)
from malaunch.entrypoint.plan.rank_table.v1 import to_v1_text

DATA = Path(__file__).parents[1] / "data" / "ranktables"
SAMPLES = sorted(path.name for path in DATA.glob("*.json"))


def layout(path: Path) -> list[tuple[str, object, list[tuple[str, int]]]]:
    table = read_rank_table(str(path))
    return [(s.server_id, s.pod_name, [(d.device_id, d.rank_id) for d in s.devices]) for s in table.servers]


# ------------------------------------------------------------------------------------------------ public samples


def test_hccl_doc_template_1() -> None:
    assert layout(DATA / "hccl_doc_template1_2x2.json") == [
        ("node_0", None, [("0", 0), ("1", 1)]),
        ("node_1", None, [("0", 2), ("1", 3)]),
    ]


def test_hccl_doc_template_2_pods_without_distinct_numbers_keep_file_order() -> None:
    table = read_rank_table(str(DATA / "hccl_doc_template2_tf_pods.json"))
    assert table.format == "v0"
    assert [(s.pod_name, [d.rank_id for d in s.devices]) for s in table.servers] == [
        ("tf-bae41", [0]), ("tf-tbdf1", [1])]
    assert len(table.notes) == 1 and "file" in table.notes[0] and "tf-bae41" in table.notes[0]
    assert select_server(table, host_ip=None, instance_name="tf-tbdf1", node_rank=None, num_hosts=2) == 1


def test_template_2_with_two_pods_on_one_server() -> None:
    table = read_rank_table(str(DATA / "tf_guide_template2_one_server.json"))
    assert [(s.server_id, s.pod_name) for s in table.servers] == [("10.0.0.10", "tf-bae41"), ("10.0.0.10", "tf-tbdf1")]
    converted = json.loads(to_v1_text(table))
    assert converted["server_list"] == [{"server_id": "10.0.0.10", "host_nic_ip": "reserve", "device": [
        {"device_id": "0", "device_ip": "192.168.0.2", "rank_id": "0"},
        {"device_id": "1", "device_ip": "192.168.1.2", "rank_id": "1"}]}]


def test_modelzoo_single_instance_without_a_number_is_fine() -> None:
    table = read_rank_table(str(DATA / "modelzoo_npu8p.json"))
    assert (table.format, table.rank_size, table.notes) == ("v0", 8, ())
    assert layout(DATA / "modelzoo_npu8p.json") == [("127.0.0.1", "npu8p", [(str(i), i) for i in range(8)])]


def test_numbered_pods_are_ordered_by_the_number_after_the_last_dash() -> None:
    data = json.loads((DATA / "hccl_doc_template2_tf_pods.json").read_text())
    pods = data["group_list"][0]["instance_list"]
    pods[0]["pod_name"], pods[1]["pod_name"] = "job-x-10", "job-y-9"
    table_path = DATA.parent / "unused"  # parse only; no file needed
    from malaunch.entrypoint.plan.rank_table import parse_rank_table

    table = parse_rank_table(data, str(table_path))
    assert [s.pod_name for s in table.servers] == ["job-y-9", "job-x-10"] and table.notes == ()
    pods[1]["pod_name"] = "job-y-10"  # the same number twice: file order, said in the notes
    table = parse_rank_table(data, str(table_path))
    assert [s.pod_name for s in table.servers] == ["job-x-10", "job-y-10"] and "file" in table.notes[0]


@pytest.mark.parametrize("name", SAMPLES)
def test_every_truncation_of_every_sample_is_waited_for(tmp_path: Path, name: str) -> None:
    raw = (DATA / name).read_bytes().rstrip()
    path = tmp_path / "hccl.json"
    for cut in range(len(raw)):
        path.write_bytes(raw[:cut])
        with pytest.raises(RankTableNotReady):
            read_rank_table(str(path))
    path.write_bytes(raw)
    assert read_rank_table(str(path)).rank_size > 0


# ------------------------------------------------------------------------------------------------ never valid


def _fifo(tmp_path: Path) -> str:
    path = tmp_path / "fifo.json"
    os.mkfifo(path)
    return str(path)


def _loop(tmp_path: Path) -> str:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    return str(tmp_path / "a")


def _oversize(tmp_path: Path) -> str:
    path = tmp_path / "big.json"
    with open(path, "wb") as handle:
        handle.truncate(MAX_RANK_TABLE_BYTES + 1)  # sparse: no disk used
    return str(path)


def _content(raw: bytes) -> Callable[[Path], str]:
    def make(tmp_path: Path) -> str:
        path = tmp_path / "hccl.json"
        path.write_bytes(raw)
        return str(path)

    return make


NEVER_VALID = [
    ("fifo", _fifo, "a FIFO"),
    ("dev-zero", lambda _tmp: "/dev/zero", "a character device"),
    ("dev-null", lambda _tmp: "/dev/null", "a character device"),
    ("symlink-loop", _loop, "symbolic links"),
    ("oversize", _oversize, "at most 64 MiB"),
    ("not-utf8", _content(b'{"status": "completed", "x": "\xff\xfe"}'), "not UTF-8"),
    ("latin1", _content(b'{"status": "caf\xe9", "group_list": []}'), "not UTF-8"),
    ("deep", _content(b"[" * 100_000), "nested too deeply"),
    ("deep-closed", _content(b"[" * 100_000 + b"]" * 100_000), "nested too deeply"),
    ("long-number", _content(b'{"status": "completed", "server_count": ' + b"9" * 5000 + b"}"), "20 digits"),
    ("garbage-mid-file", _content(b'{"status": "completed",, "version": "1.0"}'), "before the end"),
    ("trailing-garbage", _content(b'{"status": "completed"} x'), "before the end"),
    ("bad-literal", _content(b'{"status": "completed", "x": trux}'), "before the end"),
]


@pytest.mark.parametrize(("make", "fragment"), [case[1:] for case in NEVER_VALID], ids=[c[0] for c in NEVER_VALID])
def test_files_that_can_never_become_valid_are_errors_at_once(
    short_tmp: Path, make: Callable[[Path], str], fragment: str
) -> None:
    path = make(short_tmp)  # the whole path is in the message
    started = time.monotonic()
    with pytest.raises(RankTableError) as caught:
        read_rank_table(path)
    assert time.monotonic() - started < 5  # generous: the point is "no wait", not speed
    assert fragment in str(caught.value) and path in str(caught.value)
    assert exit_code_for(caught.value) == 2
    assert len(str(caught.value)) < 400


def test_a_fifo_is_never_opened_even_with_a_writer_waiting(tmp_path: Path) -> None:
    path = _fifo(tmp_path)
    opened = threading.Event()

    def writer() -> None:  # would unblock a blocking open; the reader must not need it
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader ever opened it
            return
        opened.set()
        os.close(fd)

    with pytest.raises(RankTableError):
        read_rank_table(path)
    thread = threading.Thread(target=writer)
    thread.start()
    thread.join(10)
    assert not opened.is_set()


def test_a_large_table_parses_in_bulk_like_item_by_item() -> None:
    from malaunch.entrypoint.plan.rank_table import parse_rank_table
    from shimutil import v10_table

    data = v10_table(256, 8)
    data["server_list"].reverse()  # bulk path, then ordered by lowest rank
    bulk = parse_rank_table(data, "t.json")
    data["server_list"][0]["device"][0]["device_id"] = int(data["server_list"][0]["device"][0]["device_id"])
    slow = parse_rank_table(data, "t.json")  # an int id: checked item by item
    assert bulk == slow and bulk.rank_size == 2048
    assert [d.rank_id for d in bulk.servers[-1].devices] == list(range(2040, 2048))
    assert [s.devices[0].rank_id for s in bulk.servers] == list(range(0, 2048, 8))
