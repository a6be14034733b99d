"""MindSpore worker for msrun tests: AllReduce of (rank + 1) on CPU, checked against the expected sum.

Options: --fail-rank R --exit-code C makes rank R exit with C right after init (before the collective).
--out DIR writes DIR/rank-<r>.txt with the reduced value.
"""

import argparse
import os
import sys

import mindspore as ms
import numpy as np
from mindspore import Tensor, ops
from mindspore.communication import get_group_size, get_rank, init

parser = argparse.ArgumentParser()
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--exit-code", type=int, default=1)
parser.add_argument("--out", default="")
args = parser.parse_args()

ms.set_context(mode=ms.PYNATIVE_MODE)
ms.set_device("CPU")
init()
rank, size = get_rank(), get_group_size()
print(f"rank {rank} of {size} initialised (RANK_ID={os.environ.get('RANK_ID')})", flush=True)
if rank == args.fail_rank:
    print(f"rank {rank} failing on purpose with {args.exit_code}", flush=True)
    sys.exit(args.exit_code)
value = ops.AllReduce()(Tensor(np.array([rank + 1.0], dtype=np.float32))).asnumpy()[0]
expected = size * (size + 1) / 2
print(f"rank {rank}: allreduce={value} expected={expected}", flush=True)
if args.out:
    with open(os.path.join(args.out, f"rank-{rank}.txt"), "w") as fh:
        fh.write(str(value))
sys.exit(0 if value == expected else 5)
