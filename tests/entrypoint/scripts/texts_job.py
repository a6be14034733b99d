"""A torch rank of the failure-text tests (issue 43): one gloo AllReduce over the attempt's ranks, a mark
``started-h<host>-a<attempt>`` in ``TEXTS_JOB_DIR``, then what ``TEXTS_PLAN`` (``attempt:host=action`` items,
comma-separated) says: ``compute`` (sleep 600 s outside any collective, until the test's fault ends the attempt;
the default of attempt 0), ``stop`` (SIGSTOP itself: a hung rank), ``linger`` (sleep until ``release`` exists in
``TEXTS_JOB_DIR``, then exit 0), ``ok`` (exit 0; the default of later attempts).
"""

import os
import signal
import time
from datetime import timedelta

import torch
import torch.distributed as dist

attempt = int(os.environ.get("MALAUNCH_ATTEMPT", "0"))
host = int(os.environ.get("VC_TASK_INDEX", "0"))
folder = os.environ["TEXTS_JOB_DIR"]
plan = dict(item.split("=", 1) for item in os.environ.get("TEXTS_PLAN", "").split(",") if "=" in item)
action = plan.get(f"{attempt}:{host}", "compute" if attempt == 0 else "ok")
dist.init_process_group("gloo", timeout=timedelta(seconds=120))
value = torch.ones(1)
dist.all_reduce(value)
print(f"host {host} attempt {attempt}: {action}, world size {dist.get_world_size()}", flush=True)
open(os.path.join(folder, f"started-h{host}-a{attempt}"), "w").close()
if action == "compute":
    time.sleep(600)
elif action == "stop":
    os.kill(os.getpid(), signal.SIGSTOP)
elif action == "linger":
    while not os.path.exists(os.path.join(folder, "release")):
        time.sleep(0.1)
dist.destroy_process_group()
os._exit(0)  # torch 2.13's gloo can abort (134) in the interpreter's teardown even after destroy_process_group
