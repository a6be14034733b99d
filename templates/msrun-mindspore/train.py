"""msrun boot file: a small data-parallel training on CPU that resumes through the checkpoint contract.

msrun starts one worker per device (``--local_worker_num``) and passes the cluster through MS_* variables, so
nothing here needs a port or a host name. Every worker trains a replica of one linear model (fixed weights at
start; the batch of step ``s`` is chosen by ``s`` and the rank), and the gradients are averaged over the workers
with MindSpore's ``DistributedGradReducer`` (an AllReduce).

Checkpoints (the job file's ``checkpoint:`` section, docs/recovery.md#checkpoints), in MindSpore's per-rank
layout: every ``--every`` steps each worker writes its own ``rank_<N>/train.ckpt`` (``mindspore.save_checkpoint``
of the optimizer, which holds the weights, the momentum and the step) inside the step's folder that
``malaunch.entrypoint.checkpoint.save`` gives; ``.complete`` is written once every worker has finished its part.
After a failure the shim starts the job again with ``MALAUNCH_RESUME_FROM`` (the newest complete checkpoint's
folder), and every worker loads its own ``rank_<N>/train.ckpt`` from there. With the same number of workers the
final weights are those of a run without a failure, bit for bit.

Each worker prints ``rank R step S/T loss L``; at the end rank 0 prints the final weights' SHA-256 (compare two
runs). Exit code 0.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from typing import Optional, Tuple

import mindspore as ms
import numpy as np
from malaunch.entrypoint import checkpoint
from mindspore import nn
from mindspore.communication import get_group_size, get_rank, init

FEATURES = 8


def batch(step: int, rank: int) -> Tuple[ms.Tensor, ms.Tensor]:
    """The batch of ``step`` for ``rank``: the same on every run, whatever happened before."""
    inputs = np.random.default_rng(1000 * step + rank).standard_normal((16, FEATURES)).astype(np.float32)
    return ms.Tensor(inputs), ms.Tensor(inputs.sum(axis=1, keepdims=True) * 0.5)


def resume(optimizer: nn.Optimizer, rank: int) -> int:
    """Load this worker's part of the newest complete checkpoint; the step it holds (0: none yet)."""
    folder: Optional[str] = checkpoint.resume_from()  # MALAUNCH_RESUME_FROM, set by the shim after a failure
    if folder is None:
        return 0
    saved = ms.load_checkpoint(os.path.join(folder, f"rank_{rank}", "train.ckpt"))
    ms.load_param_into_net(optimizer, saved)  # the optimizer holds the weights too
    print(f"rank {rank}: resuming from {folder}", flush=True)
    return int(saved["step"].asnumpy())


def save(optimizer: nn.Optimizer, step: int, rank: int, size: int) -> None:
    """This worker's part of the checkpoint of ``step`` (complete once every worker's part is written)."""
    with checkpoint.save(step, rank=rank, ranks=size) as folder:
        mine = os.path.join(folder, f"rank_{rank}")
        os.makedirs(mine, exist_ok=True)
        ms.save_checkpoint(optimizer, os.path.join(mine, "train.ckpt"), append_dict={"step": step})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--every", type=int, default=5, help="save a checkpoint every N steps")
    parser.add_argument("--step-seconds", type=float, default=0.0, help="pause after each step (a longer run)")
    options = parser.parse_args()
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    init()
    rank, size = get_rank(), get_group_size()
    start = np.random.default_rng(0).standard_normal((1, FEATURES)).astype(np.float32)
    net = nn.Dense(FEATURES, 1, weight_init=ms.Tensor(start), bias_init="zeros")
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    loss_fn = nn.MSELoss()
    grads_of = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, optimizer.parameters)
    average = nn.DistributedGradReducer(optimizer.parameters, mean=True, degree=size)
    saves = checkpoint.directory() is not None  # the job file has a checkpoint: section
    first = resume(optimizer, rank) + 1 if saves else 1
    for step in range(first, options.steps + 1):
        loss, grads = grads_of(*batch(step, rank))
        optimizer(average(grads))
        print(f"rank {rank} step {step}/{options.steps} loss {float(loss.asnumpy()):.6f}", flush=True)
        checkpoint.progress(step, options.steps)
        if saves and step % options.every == 0:
            save(optimizer, step, rank, size)
        time.sleep(options.step_seconds)
    if rank == 0:
        weights = b"".join(param.asnumpy().tobytes() for param in net.trainable_params())
        print(f"final weights sha256 {hashlib.sha256(weights).hexdigest()} after {options.steps} steps "
              f"on {size} workers", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
