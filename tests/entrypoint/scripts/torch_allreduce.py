"""torch worker for torchrun / rank-table tests: gloo all_reduce of (rank + 1), checked against the sum.

Options: --fail-rank R --exit-code C makes global rank R exit with C after init_process_group.
--out DIR writes DIR/rank-<r>.json with the reduced value and the rank variables.
"""

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--exit-code", type=int, default=1)
parser.add_argument("--out", default="")
args = parser.parse_args()

dist.init_process_group("gloo")
rank, size = dist.get_rank(), dist.get_world_size()
if rank == args.fail_rank:
    print(f"rank {rank} failing on purpose with {args.exit_code}", flush=True)
    os._exit(args.exit_code)
tensor = torch.tensor([rank + 1.0])
dist.all_reduce(tensor)
expected = size * (size + 1) / 2
print(f"rank {rank}/{size}: all_reduce={tensor.item()} expected={expected}", flush=True)
if args.out:
    names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")
    record = {"value": tensor.item(), "env": {n: os.environ.get(n) for n in names}}
    with open(os.path.join(args.out, f"rank-{rank}.json"), "w") as fh:
        json.dump(record, fh)
dist.destroy_process_group()
sys.stdout.flush()
# torch 2.13's gloo can abort (134) in the interpreter's teardown even after destroy_process_group
os._exit(0 if tensor.item() == expected else 5)
