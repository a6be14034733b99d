"""A rank of the prepare-step tests: it records when it started, then one all_reduce over every rank (torch gloo).

Its first act writes ``time.time()`` into ``<HOSTS_JOB_DIR>/rank-start-<RANK>``: the ranks' own start times, which
the test compares. Then ``init_process_group`` and one all_reduce of ones: ``sum N`` for N ranks.
"""

import os
import time

started = time.time()
folder = os.environ["HOSTS_JOB_DIR"]
with open(os.path.join(folder, f"rank-start-{os.environ['RANK']}"), "w") as handle:
    handle.write(repr(started))

from datetime import timedelta  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo", timeout=timedelta(seconds=60))
value = torch.ones(1)
dist.all_reduce(value)
print(f"rank {dist.get_rank()} sum {value.item():g}", flush=True)
dist.destroy_process_group()
os._exit(0)  # torch 2.13's gloo can abort in the interpreter's teardown even after destroy_process_group
