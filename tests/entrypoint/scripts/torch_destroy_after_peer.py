"""Real torch, gloo: an all_reduce, then rank 1 exits 5 at once while rank 0 goes on into the next all_reduce
and ``destroy_process_group`` with its peer gone: gloo fails it ("Connection reset by peer"), or the teardown
aborts it ("terminate called without an active exception"). Rank 1 is the root cause either way (issue 16.1).

Usage: torch_destroy_after_peer.py DIR   each rank writes DIR/ready-<rank> after the first all_reduce and
waits for DIR/go (a wall-clock time T); rank 1 exits at T.
"""

import os
import sys
import time

import torch
import torch.distributed as dist

folder = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
value = torch.ones(4)
dist.all_reduce(value)
print(f"rank {rank} all_reduce done: {value.tolist()}", flush=True)
open(os.path.join(folder, f"ready-{rank}"), "w").close()
go = os.path.join(folder, "go")
while not os.path.exists(go):
    time.sleep(0.005)
with open(go) as handle:
    at = float(handle.read())
if rank == 1:
    time.sleep(max(0.0, at - time.time()))
    print("rank 1 exits 5 right after the all_reduce", flush=True)
    os._exit(5)
dist.all_reduce(value)  # the peer is gone: gloo fails here, or the teardown aborts
dist.destroy_process_group()
print(f"rank {rank} done", flush=True)
