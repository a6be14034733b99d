"""MindSpore CPU job for the recovery test: AllReduce steps; worker KILL_NODE dies by SIGKILL mid-run once.

Usage: ms_steps.py [STEPS] [KILL_NODE]. Prints "rank R step S sum V" per step and "rank R done" at the end;
the first start of worker KILL_NODE (default 1) SIGKILLs itself after step 2 (a marker in MS_RECOVERY_PATH
makes the relaunch run through).
"""

from __future__ import annotations

import os
import signal
import sys
import time

import mindspore as ms
import numpy as np
from mindspore import ops
from mindspore.communication import get_group_size, get_rank, init

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 6
kill_node = int(sys.argv[2]) if len(sys.argv) > 2 else 1
ms.set_context(mode=ms.PYNATIVE_MODE)
ms.set_device("CPU")
init()
rank, size = get_rank(), get_group_size()
path = os.environ.get("MS_RECOVERY_PATH", ".")
os.makedirs(path, exist_ok=True)
print(f"rank {rank}/{size} up, MS_NODE_ID={os.environ.get('MS_NODE_ID')}", flush=True)
for step in range(steps):
    value = float(ops.AllReduce()(ms.Tensor(np.array([1.0], dtype=np.float32))).asnumpy()[0])
    print(f"rank {rank} step {step} sum {value:g}", flush=True)
    marker = os.path.join(path, f"killed-{rank}")
    if rank == kill_node and step == 2 and not os.path.exists(marker):
        open(marker, "w").close()
        print(f"rank {rank} dies mid-run", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
print(f"rank {rank} done", flush=True)
