"""Stands in for a MindSpore process in dynamic-networking mode, to test the shim's relaunch protocol.

Usage: ms_recovery_probe.py [KILL_NODE]
Every start appends {role, node_id, pid, recovery_path, time} to <MS_RECOVERY_PATH>/starts.jsonl.
The scheduler (MS_ROLE=MS_SCHED) waits until every worker has written done-<id>, then exits 0.
Worker KILL_NODE (default 1) SIGKILLs itself mid-run on its first start; every other start finishes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

kill_node = sys.argv[1] if len(sys.argv) > 1 else "1"
path = os.environ["MS_RECOVERY_PATH"]
os.makedirs(path, exist_ok=True)
role, node = os.environ["MS_ROLE"], os.environ.get("MS_NODE_ID", "")
entry = {"role": role, "node_id": node, "pid": os.getpid(), "recovery_path": path, "time": time.time(),
         "rank_id": os.environ.get("RANK_ID"), "worker_num": os.environ.get("MS_WORKER_NUM")}  # fmt: skip
with open(os.path.join(path, "starts.jsonl"), "a", encoding="utf-8") as fh:
    fh.write(json.dumps(entry) + "\n")
print(f"{role} {node} started", flush=True)
if role == "MS_SCHED":
    workers = int(os.environ["MS_WORKER_NUM"])
    deadline = time.time() + 120
    while not all(os.path.exists(os.path.join(path, f"done-{i}")) for i in range(workers)):
        if time.time() > deadline:
            sys.exit(7)
        time.sleep(0.1)
    print("scheduler: every worker finished", flush=True)
    sys.exit(0)
marker = os.path.join(path, f"killed-{node}")
time.sleep(1.0)  # "training"
if node == kill_node and not os.path.exists(marker):
    open(marker, "w").close()
    print(f"worker {node} dies mid-run", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
open(os.path.join(path, f"done-{node}"), "w").close()
print(f"worker {node} done", flush=True)
