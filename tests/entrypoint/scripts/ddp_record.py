"""PyTorch DDP tutorial style, unmodified idioms: @record on main, gloo, a tiny model, DistributedDataParallel.

--fail-rank R --error TEXT: rank R raises ValueError(TEXT) after the first step; the other ranks carry on into
the next all-reduce, where gloo fails them once R is gone.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP


@record
def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--error", default="boom")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DDP(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(args.steps):
        optimizer.zero_grad()
        model(torch.ones(8, 4)).sum().backward()
        optimizer.step()
        print(f"rank {rank} step {step}", flush=True)
        if rank == args.fail_rank:
            raise ValueError(args.error)
    dist.destroy_process_group()
    print(f"rank {rank} done (LOCAL_RANK={os.environ['LOCAL_RANK']})", flush=True)


if __name__ == "__main__":
    main()
    os._exit(0)  # torch 2.13's gloo can abort (134) in the interpreter's teardown even after destroy_process_group
