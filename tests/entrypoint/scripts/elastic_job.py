"""A rank of the elastic torchrun tests (MALAUNCH_MIN_HOSTS): one gloo AllReduce over the attempt's ranks, then
it says the world it saw (``WORLD_SIZE=N``) and leaves ``world-h<host>-a<attempt>-w<N>`` in ``HOSTS_JOB_DIR``.

Attempts below ``ELASTIC_FINISH_AT`` then compute (sleep 600 s, outside any collective) until the test changes
the job's hosts; the attempt ``ELASTIC_FINISH_AT`` and later ones exit 0.
"""

import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

attempt = int(os.environ.get("MALAUNCH_ATTEMPT", "0"))
host = int(os.environ.get("VC_TASK_INDEX", "0"))
dist.init_process_group("gloo", timeout=timedelta(seconds=120))
size = dist.get_world_size()
value = torch.ones(1)
dist.all_reduce(value)
print(f"WORLD_SIZE={size} rank {dist.get_rank()} host {host} attempt {attempt} sum {value.item():g}", flush=True)
open(os.path.join(os.environ["HOSTS_JOB_DIR"], f"world-h{host}-a{attempt}-w{size}"), "w").close()
if attempt < int(os.environ.get("ELASTIC_FINISH_AT", "0")):
    time.sleep(600)
dist.destroy_process_group()
os._exit(0)  # torch 2.13's gloo can abort (134) in the interpreter's teardown even after destroy_process_group
