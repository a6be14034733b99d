"""torchrun boot file: a real gloo all_reduce of every rank's number, checked against the expected sum.

torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, so ``init_process_group("gloo", "env://")``
needs no port here. Runs on CPU. Exit code 0 when the sum is right, 1 when it is not.

The world size torchrun must have made is derived from the platform's variables, as the shim derives
torchrun's own arguments: ``MA_NUM_HOSTS`` hosts x ``MA_NUM_GPUS`` processes per host (one when it is 0 or
unset). So the same file runs with ``--hosts 1`` or ``--devices-per-host 4`` on every backend;
``--expect-world-size N`` still overrides it.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Mapping, Optional

import torch
import torch.distributed as dist


def expected_world_size(environ: Mapping[str, str]) -> Optional[int]:
    """MA_NUM_HOSTS x max(MA_NUM_GPUS, 1), or None when the platform did not say how many hosts."""
    try:
        hosts = int(environ["MA_NUM_HOSTS"])
        per_host = int(environ.get("MA_NUM_GPUS") or 0)
    except (KeyError, ValueError):
        return None
    return hosts * max(per_host, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--expect-world-size", type=int, default=expected_world_size(os.environ))
    options = parser.parse_args()
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    if options.expect_world_size is not None and world != options.expect_world_size:
        print(f"rank {rank}: world size {world}, expected {options.expect_world_size}", flush=True)
        return 1
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    expected = world * (world + 1) / 2
    host = os.environ.get("MA_CURRENT_HOST_IP", "?")
    print(f"rank {rank}/{world} on host {host}: all_reduce sum = {value.item():g}, expected {expected:g}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if value.item() != expected:
        print(f"rank {rank}: WRONG SUM", flush=True)
        return 1
    if rank == 0:
        print(f"all_reduce OK across {world} ranks", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
