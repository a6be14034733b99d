"""msrun boot file for group restarts: worker 1 SIGKILLs itself after init on attempt 0, then all AllReduce.

Prints "rank R attempt A ..." lines; TORCHELASTIC_RESTART_COUNT is the shim's attempt number.
"""

from __future__ import annotations

import os
import signal

import mindspore as ms
import numpy as np
from mindspore import ops
from mindspore.communication import get_group_size, get_rank, init

ms.set_context(mode=ms.PYNATIVE_MODE)
ms.set_device("CPU")
init()
rank, size = get_rank(), get_group_size()
attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")
print(f"rank {rank} attempt {attempt} of max {os.environ.get('TORCHELASTIC_MAX_RESTARTS')} up", flush=True)
if rank == 1 and attempt == "0":
    print("rank 1 dies", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
total = float(ops.AllReduce()(ms.Tensor(np.array([1.0], dtype=np.float32))).asnumpy()[0])
print(f"rank {rank} attempt {attempt} sum {total:g}", flush=True)
