"""msrun boot file: ``mindspore.communication.init()`` on CPU and a real AllReduce, checked against the sum.

msrun starts one worker per device (``--local_worker_num``) and passes the cluster through MS_* variables,
so nothing here needs a port or a host name. Exit code 0 when the sum is right, 1 when it is not.
"""

from __future__ import annotations

import sys

import mindspore as ms
import numpy as np
from mindspore import ops
from mindspore.communication import get_group_size, get_rank, init


def main() -> int:
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    init()
    rank, size = get_rank(), get_group_size()
    value = ms.Tensor(np.array([rank + 1], dtype=np.float32))
    total = float(ops.AllReduce()(value).asnumpy()[0])
    expected = size * (size + 1) / 2
    print(f"rank {rank}/{size}: AllReduce sum = {total:g}, expected {expected:g}", flush=True)
    if total != expected:
        print(f"rank {rank}: WRONG SUM", flush=True)
        return 1
    if rank == 0:
        print(f"AllReduce OK across {size} workers", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
