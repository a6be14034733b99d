"""Rank-table boot file: check the Ascend variables against the rank table, then a small data-parallel training
that resumes through the checkpoint contract.

The shim starts this file once per device. It checks that RANK_ID, RANK_SIZE and DEVICE_ID agree with the
rank table in RANK_TABLE_FILE (this host's server is the one whose server_id is MA_CURRENT_HOST_IP), then
joins a torch.distributed gloo group through RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, which the shim sets.
Every rank trains a replica of one linear model (fixed seed; the batch of step ``s`` is chosen by ``s`` and the
rank; gradients averaged with ``all_reduce``).

Checkpoints (the job file's ``checkpoint:`` section, docs/recovery.md#checkpoints), one folder per rank as
MindSpore lays them out: every ``--every`` steps each rank writes its own ``rank_<N>/model.pt`` inside the step's
folder that ``malaunch.entrypoint.checkpoint.save`` gives; ``.complete`` is written once every rank has finished
its part. After a failure the shim starts the job again with ``MALAUNCH_RESUME_FROM`` (the newest complete
checkpoint's folder) and every rank loads its own part. With the same ranks the final weights are those of a run
without a failure, bit for bit.

Each rank prints ``rank R step S/T loss L``; at the end rank 0 prints the final weights' SHA-256 (compare two
runs). Exit code 0 when the rank table matches, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from typing import Any, Dict, List, Tuple

import torch
import torch.distributed as dist
import torch.distributed.nn  # before init_process_group (see templates/torchrun-ddp's exit_now)
from malaunch.entrypoint import checkpoint

FEATURES = 8


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


def batch(step: int, rank: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """The batch of ``step`` for ``rank``: the same on every run, whatever happened before."""
    inputs = torch.randn(16, FEATURES, generator=torch.Generator().manual_seed(1000 * step + rank))
    return inputs, inputs.sum(dim=1, keepdim=True) * 0.5


def resume(model: torch.nn.Module, optimizer: torch.optim.Optimizer, rank: int) -> int:
    """Load this rank's part of the newest complete checkpoint; the step it holds (0: none yet)."""
    folder = checkpoint.resume_from()  # MALAUNCH_RESUME_FROM, set by the shim after a failure
    if folder is None:
        return 0
    saved = torch.load(os.path.join(folder, f"rank_{rank}", "model.pt"))
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    print(f"rank {rank}: resuming from {folder}", flush=True)
    return int(saved["step"])


def save(model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int, rank: int) -> None:
    """This rank's part of the checkpoint of ``step`` (complete once every rank's part is written)."""
    with checkpoint.save(step) as folder:  # it reads the rank and the number of ranks from RANK/WORLD_SIZE
        mine = os.path.join(folder, f"rank_{rank}")
        os.makedirs(mine, exist_ok=True)
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
                   os.path.join(mine, "model.pt"))  # fmt: skip


def train(options: argparse.Namespace, rank: int, world: int) -> torch.nn.Module:
    """A linear model trained on every rank with SGD and momentum, gradients averaged over the ranks."""
    torch.manual_seed(0)
    model = torch.nn.Linear(FEATURES, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    saves = checkpoint.directory() is not None  # the job file has a checkpoint: section
    first = resume(model, optimizer, rank) + 1 if saves else 1
    for step in range(first, options.steps + 1):
        optimizer.zero_grad()
        inputs, targets = batch(step, rank)
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        for parameter in model.parameters():
            dist.all_reduce(parameter.grad)
            parameter.grad /= world
        optimizer.step()
        print(f"rank {rank} step {step}/{options.steps} loss {loss.item():.6f}", flush=True)
        checkpoint.progress(step, options.steps)
        if saves and step % options.every == 0:
            save(model, optimizer, step, rank)
        time.sleep(options.step_seconds)
    return model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--every", type=int, default=5, help="save a checkpoint every N steps")
    parser.add_argument("--step-seconds", type=float, default=0.0, help="pause after each step (a longer run)")
    options = parser.parse_args()
    failed = check_rank_table()
    if failed:
        return failed
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank != int(os.environ["RANK_ID"]) or world != int(os.environ["RANK_SIZE"]):
        return _fail(f"torch rank {rank}/{world} differs from RANK_ID/RANK_SIZE")
    print(f"rank {rank}/{world} device {os.environ['DEVICE_ID']} on {os.environ.get('MA_CURRENT_HOST_IP')}: "
          "rank table OK", flush=True)  # fmt: skip
    model = train(options, rank, world)
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        weights = b"".join(value.detach().numpy().tobytes() for value in model.state_dict().values())
        print(f"final weights sha256 {hashlib.sha256(weights).hexdigest()} after {options.steps} steps "
              f"on {world} ranks", flush=True)  # fmt: skip
    return 0


def exit_now(code: int) -> None:
    """End with ``code`` once the output is out, without the interpreter's teardown, where torch 2.13's gloo
    can abort (SIGABRT, 134) after ``destroy_process_group`` has returned (see templates/torchrun-ddp)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
