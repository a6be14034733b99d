"""torchrun boot file: a small data-parallel training that survives a change of world size, then a checked
gloo all_reduce of every rank's number.

torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, so ``init_process_group("gloo", "env://")``
needs no port here. Runs on CPU. Exit code 0 when the sum is right, 1 when it is not.

What makes it survive a host lost or taken back in (an elastic job, ``launcher.min_hosts``; each change starts
the script again with another world size, docs/recovery.md#surviving-a-change-of-world-size):

- **checkpoint each epoch** through the contract (the job file's ``checkpoint:`` section gives every rank
  ``MALAUNCH_CHECKPOINT_DIR``, docs/recovery.md#checkpoints): rank 0 writes the model and the next epoch into
  ``<folder>/step-<epoch>/model.pt`` with ``malaunch.entrypoint.checkpoint.save``, which writes ``.complete``
  last, so a rank killed while writing leaves the checkpoint incomplete and the one before is used;
  ``--checkpoint-dir`` names another folder;
- **resume**: at start rank 0 reads ``MALAUNCH_RESUME_FROM`` (the newest complete checkpoint, set by the shim)
  if there is one and broadcasts it, so every rank starts from the same weights and epoch whatever the world size
  (only rank 0 needs to see the folder);
- **shard by the current world**: rank ``r`` of ``w`` trains on samples ``r, r + w, r + 2w, ...``, read from
  the process group at every start (never from the job file), and gradients are averaged over ``w``.

The world size is checked against the platform's variables, as the shim derives torchrun's arguments:
``MA_NUM_HOSTS`` hosts x ``MA_NUM_GPUS`` processes per host (one when it is 0 or unset), or, in an elastic job,
any whole number of hosts from ``MALAUNCH_MIN_HOSTS`` to ``MA_NUM_HOSTS``. So the same file runs with
``--hosts 1`` or ``--devices-per-host 4`` on every backend; ``--expect-world-size N`` still overrides it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import List, Mapping, Optional

import torch
import torch.distributed as dist
import torch.distributed.nn  # before init_process_group (see exit_now)
from malaunch.entrypoint import checkpoint

SAMPLES = 64


def expected_world_sizes(environ: Mapping[str, str]) -> Optional[List[int]]:
    """The world sizes the platform allows: MA_NUM_HOSTS x max(MA_NUM_GPUS, 1), or from MALAUNCH_MIN_HOSTS hosts
    up in an elastic job; None when the platform did not say how many hosts."""
    try:
        hosts = int(environ["MA_NUM_HOSTS"])
        per_host = max(int(environ.get("MA_NUM_GPUS") or 0), 1)
        least = int(environ.get("MALAUNCH_MIN_HOSTS") or hosts)
    except (KeyError, ValueError):
        return None
    return [count * per_host for count in range(least, hosts + 1)]


def checkpoint_dir(given: Optional[str], environ: Mapping[str, str]) -> Optional[str]:
    """``--checkpoint-dir``, else ``MALAUNCH_CHECKPOINT_DIR`` (the job file's ``checkpoint:`` section), else None
    (no checkpoints)."""
    return given or checkpoint.directory(environ)


def resume(model: torch.nn.Module, folder: Optional[str], rank: int) -> int:
    """Every rank gets rank 0's checkpoint (weights, next epoch); 0 when there is none."""
    start = torch.zeros(1, dtype=torch.int64)
    found = None
    if rank == 0 and folder is not None:
        newest = checkpoint.latest(folder)
        given = os.environ.get("MALAUNCH_RESUME_FROM") if folder == checkpoint.directory() else None
        found = given or (newest.path if newest is not None else None)
    if found is not None:
        saved = torch.load(os.path.join(found, "model.pt"))
        model.load_state_dict(saved["model"])
        start[0] = int(saved["epoch"])
        print(f"resuming from {found}", flush=True)
    dist.broadcast(start, src=0)
    for parameter in model.parameters():
        dist.broadcast(parameter.data, src=0)
    return int(start.item())


def save(model: torch.nn.Module, folder: str, epoch: int) -> None:
    """Rank 0's checkpoint after ``epoch`` (rank 0 alone writes it: the one part of the save)."""
    with checkpoint.save(epoch + 1, folder, rank=0, ranks=1) as target:
        torch.save({"model": model.state_dict(), "epoch": epoch + 1}, os.path.join(target, "model.pt"))


def train(options: argparse.Namespace, rank: int, world: int) -> None:
    """Linear regression of y = 3x + 1 on this rank's shard, gradients averaged over the current world."""
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    folder = checkpoint_dir(options.checkpoint_dir, os.environ)
    start = resume(model, folder, rank)
    if rank == 0 and start:
        print(f"resumed at epoch {start} from {folder}", flush=True)
    inputs = torch.linspace(-1.0, 1.0, SAMPLES).unsqueeze(1)
    shard = inputs[rank::world]
    for epoch in range(start, options.epochs):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(shard), 3.0 * shard + 1.0)
        loss.backward()
        for parameter in model.parameters():
            if parameter.grad is not None:
                dist.all_reduce(parameter.grad, op=dist.ReduceOp.SUM)
                parameter.grad /= world
        optimizer.step()
        if rank == 0 and folder is not None:
            save(model, folder, epoch)
        if rank == 0:
            print(f"epoch {epoch + 1}/{options.epochs}: world size {world}, {len(shard)} samples per rank, "
                  f"loss {loss.item():.4f}", flush=True)  # fmt: skip
        time.sleep(options.epoch_seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--expect-world-size", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--epoch-seconds", type=float, default=0.0, help="pause after each epoch (a longer run)")
    parser.add_argument("--checkpoint-dir", default=None, help="a folder every host sees (default: "
                        "MALAUNCH_CHECKPOINT_DIR, from the job file's checkpoint: section)")
    options = parser.parse_args()
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    allowed = [options.expect_world_size] if options.expect_world_size else expected_world_sizes(os.environ)
    if allowed is not None and world not in allowed:
        print(f"rank {rank}: world size {world}, expected {' or '.join(map(str, allowed))}", flush=True)
        return 1
    train(options, rank, world)
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


def exit_now(code: int) -> None:
    """End with ``code`` once the output is out, without the interpreter's teardown. torch 2.13 with gloo on CPU
    can abort in that teardown (SIGABRT, exit 134, ``terminate called without an active exception``) after
    ``destroy_process_group`` has returned and ``main`` has too (about one run in 40 of two ranks here), when the
    process group is still alive then. It was, until ``torch.distributed.nn`` was imported above: the first
    optimizer imports it (through ``torch._dynamo``), and imported after ``init_process_group`` its collectives'
    default argument ``group=group.WORLD`` keeps the group, so ``destroy_process_group`` freed nothing and gloo's
    threads were ended only in the teardown. Imported first, the default is None and the group is gone when
    ``destroy_process_group`` returns; the ending stays as a guard. Everything worth keeping (checkpoint, output)
    is written by then."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
