"""Ranks that ignore SIGTERM and SIGINT: only SIGKILL ends them.

  stubborn.py DIR [FAIL_RANK CODE]
Each rank writes DIR/ready-<rank>; with FAIL_RANK, once DIR/go exists that rank exits with CODE. The others
sleep until killed.
"""

import os
import signal
import sys
import time

folder = sys.argv[1]
fail_rank, code = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (-1, 0)
rank = int(os.environ.get("MS_NODE_ID") or os.environ.get("RANK_ID") or os.environ.get("RANK") or "0")
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
open(os.path.join(folder, f"ready-{rank}"), "w").close()
while rank != fail_rank or not os.path.exists(os.path.join(folder, "go")):
    time.sleep(0.01)
print(f"rank {rank} failing with {code}", flush=True)
sys.exit(code)
