"""Rank-table boot file: check the Ascend variables against the rank table, then a gloo all_reduce.

The shim starts this file once per device. It checks that RANK_ID, RANK_SIZE and DEVICE_ID agree with the
rank table in RANK_TABLE_FILE (this host's server is the one whose server_id is MA_CURRENT_HOST_IP), then
joins a torch.distributed gloo group through RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, which the shim sets,
and all-reduces every rank's number. Exit code 0 when everything matches, 1 otherwise.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List

import torch
import torch.distributed as dist


def _fail(message: str) -> int:
    print(f"rank {os.environ.get('RANK_ID', '?')}: CHECK FAILED: {message}", flush=True)
    return 1


def _load_table(path: str) -> Dict[str, Any]:
    if os.path.isdir(path):
        path = os.path.join(path, "jobstart_hccl.json")
    with open(path, encoding="utf-8") as handle:
        table: Dict[str, Any] = json.load(handle)
    return table


def check_rank_table() -> int:
    rank_id, rank_size = int(os.environ["RANK_ID"]), int(os.environ["RANK_SIZE"])
    device_id = os.environ["DEVICE_ID"]
    table = _load_table(os.environ["RANK_TABLE_FILE"])
    if table.get("status") != "completed":
        return _fail(f"rank table status is {table.get('status')!r}")
    servers: List[Dict[str, Any]] = table["server_list"]
    devices = [device for server in servers for device in server["device"]]
    if len(devices) != rank_size:
        return _fail(f"RANK_SIZE={rank_size} but the rank table lists {len(devices)} devices")
    mine = [server for server in servers if server["server_id"] == os.environ.get("MA_CURRENT_HOST_IP")]
    if len(mine) != 1:
        return _fail(f"no single server with server_id {os.environ.get('MA_CURRENT_HOST_IP')!r}")
    entry = [device for device in mine[0]["device"] if int(device["rank_id"]) == rank_id]
    if len(entry) != 1:
        return _fail(f"RANK_ID={rank_id} is not a device of this host's server")
    local_index = mine[0]["device"].index(entry[0])
    if str(local_index) != device_id:
        return _fail(f"DEVICE_ID={device_id}, but rank {rank_id} is device #{local_index} of this server")
    return 0


def main() -> int:
    failed = check_rank_table()
    if failed:
        return failed
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank != int(os.environ["RANK_ID"]) or world != int(os.environ["RANK_SIZE"]):
        return _fail(f"torch rank {rank}/{world} differs from RANK_ID/RANK_SIZE")
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    expected = world * (world + 1) / 2
    print(
        f"rank {rank}/{world} device {os.environ['DEVICE_ID']} on {os.environ.get('MA_CURRENT_HOST_IP')}: "
        f"rank table OK, all_reduce sum = {value.item():g}, expected {expected:g}",
        flush=True,
    )
    dist.barrier()
    dist.destroy_process_group()
    if value.item() != expected:
        return _fail("wrong all_reduce sum")
    return 0


def exit_now(code: int) -> None:
    """End with ``code`` once the output is out, without the interpreter's teardown, where torch 2.13's gloo
    can abort (SIGABRT, 134) after ``destroy_process_group`` has returned (see templates/torchrun-ddp)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
