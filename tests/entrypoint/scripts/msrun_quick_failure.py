"""Two msrun workers; rank 1 fails when the test says, and lives too briefly for the shim's watch to see it.

  msrun_quick_failure.py DIR MODE
msrun's scheduler exits 0 at once. Each worker writes its pid to DIR/ready-<rank>. Rank 0 then waits to be
ended (msrun SIGKILLs it once it sees rank 1's failure). Rank 1 waits for DIR/go, then exits 3 (MODE ``exit``)
or SIGKILLs itself (MODE ``kill``).
"""

import os
import signal
import sys
import time

folder, mode = sys.argv[1], sys.argv[2]
if os.environ.get("MS_ROLE") == "MS_SCHED":
    sys.exit(0)
rank = int(os.environ.get("MS_NODE_ID") or os.environ.get("RANK_ID") or "0")
with open(os.path.join(folder, f"ready-{rank}.tmp"), "w") as handle:
    handle.write(str(os.getpid()))
os.replace(os.path.join(folder, f"ready-{rank}.tmp"), os.path.join(folder, f"ready-{rank}"))
print(f"rank {rank} started", flush=True)
if rank != 1:
    time.sleep(120)
    sys.exit(98)
while not os.path.exists(os.path.join(folder, "go")):
    time.sleep(0.005)
print(f"rank {rank} failing on purpose ({mode})", flush=True)
if mode == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(3)
