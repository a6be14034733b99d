"""Write this process's rank variables to OUT/rank-<RANK_ID>.json; exit with --exit-code on rank --fail-rank."""

import argparse
import json
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--exit-code", type=int, default=1)
parser.add_argument("--sleep", type=float, default=0.0)
args = parser.parse_args()

names = (
    "RANK_TABLE_FILE", "RANK_ID", "RANK_SIZE", "ASCEND_DEVICE_ID", "DEVICE_ID", "RANK", "LOCAL_RANK",
    "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
)
rank = int(os.environ["RANK_ID"])
with open(os.path.join(args.out, f"rank-{rank}.json"), "w") as fh:
    json.dump({"env": {n: os.environ.get(n) for n in names}, "cwd": os.getcwd(), "pid": os.getpid()}, fh)
print(f"rank {rank} wrote its environment", flush=True)
if rank == args.fail_rank:
    time.sleep(0.2)
    print(f"rank {rank} failing with {args.exit_code}", file=sys.stderr, flush=True)
    sys.exit(args.exit_code)
time.sleep(args.sleep)
