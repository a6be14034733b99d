"""A rank for the coordinated-restart tests under every launch method (torch gloo, or MindSpore under msrun).

Attempt 0: the job's last rank SIGKILLs itself a second after the group formed, while every other rank computes
(a 600 s sleep) outside any collective: only the hosts' coordinator can end their attempt. Attempt 1: one
AllReduce over every rank, then exit 0.
"""

import os
import signal
import time

attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or 0)
if os.environ.get("HOSTS_METHOD") == "msrun":
    import mindspore as ms
    import numpy as np
    from mindspore import ops
    from mindspore.communication import get_group_size, get_rank, init

    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    init()
    rank, size = get_rank(), get_group_size()

    def total() -> float:
        return float(ops.AllReduce()(ms.Tensor(np.array([1.0], dtype=np.float32))).asnumpy()[0])
else:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    rank, size = dist.get_rank(), dist.get_world_size()

    def total() -> float:
        value = torch.ones(1)
        dist.all_reduce(value)
        dist.destroy_process_group()  # as a script should: exiting with it alive may abort (SIGABRT) in teardown
        return float(value.item())

print(f"rank {rank} of {size} attempt {attempt} up", flush=True)
if attempt == 0:
    if rank == size - 1:
        time.sleep(1.0)
        print(f"rank {rank} dies", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(600)
print(f"rank {rank} attempt {attempt} sum {total():g}", flush=True)
if os.environ.get("HOSTS_METHOD") != "msrun":  # MindSpore's own ending stays
    os._exit(0)  # torch 2.13's gloo can abort (134) in the interpreter's teardown even after destroy_process_group
