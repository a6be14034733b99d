"""A rank that fails on chosen attempts: records every start, then fails or succeeds.

Usage: flaky.py RECORD_DIR MODE [FAIL_ATTEMPTS]
  RECORD_DIR     each start appends a JSON line to <dir>/starts-<rank>.jsonl (rank, attempt, max, pid)
  MODE           kill9 (SIGKILL itself: 137), exit2 (exit 2), exit1 (exit 1), kill9-exit3 (SIGKILL on attempt 0,
                 exit 3 later), ok
  FAIL_ATTEMPTS  attempts (MALAUNCH_ATTEMPT, else TORCHELASTIC_RESTART_COUNT: torchrun's own restarts) that
                 fail, comma-separated; default 0
Only the rank named by FLAKY_RANK (default 0) fails: once every rank of the group (WORLD_SIZE, from 0) has
recorded its start of the same attempt, then FLAKY_DELAY seconds (default 0.3) later. The others wait a little and
succeed. Waiting for the peers' records makes the tests' check that every rank started each attempt hold on a busy
machine: a peer that boots more slowly than the failing rank's delay is never ended by the job's teardown before
it has written its record (a record missing from a peer that was stopped before it ran proves nothing).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

record_dir, mode = sys.argv[1], sys.argv[2]
fail_attempts = {int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "0").split(",") if x}
rank = int(os.environ.get("RANK", os.environ.get("MS_NODE_ID", "0")))
attempt = int(os.environ.get("MALAUNCH_ATTEMPT") or os.environ.get("TORCHELASTIC_RESTART_COUNT", "-1"))
entry = {"rank": rank, "attempt": attempt, "max": os.environ.get("TORCHELASTIC_MAX_RESTARTS"), "pid": os.getpid()}
with open(os.path.join(record_dir, f"starts-{rank}.jsonl"), "a", encoding="utf-8") as fh:
    fh.write(json.dumps(entry) + "\n")
print(f"rank {rank} attempt {attempt} started", flush=True)
failing = rank == int(os.environ.get("FLAKY_RANK", "0")) and attempt in fail_attempts
if not failing or mode == "ok":
    time.sleep(0.5)
    sys.exit(0)


def started(peer: int) -> bool:
    """The peer has recorded its start of this attempt (a line being written is not one yet)."""
    try:
        with open(os.path.join(record_dir, f"starts-{peer}.jsonl"), encoding="utf-8") as fh:
            lines = fh.read().split("\n")[:-1]  # whole lines only
    except FileNotFoundError:
        return False
    return any(json.loads(line)["attempt"] == attempt for line in lines)


deadline = time.monotonic() + 120  # only against hanging: a peer that never starts fails the test's own check
waiting = set(range(int(os.environ.get("WORLD_SIZE", "1")))) - {rank}
while waiting and time.monotonic() < deadline:
    waiting = {peer for peer in waiting if not started(peer)}
    if waiting:
        time.sleep(0.01)
time.sleep(float(os.environ.get("FLAKY_DELAY", "0.3")))
print(f"rank {rank} attempt {attempt} fails with {mode}", flush=True)
if mode == "kill9" or (mode == "kill9-exit3" and attempt == 0):
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit({"exit2": 2, "kill9-exit3": 3}.get(mode, 1))
