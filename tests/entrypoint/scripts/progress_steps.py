"""A rank that makes steps and reports each with ``checkpoint.progress`` (and prints nothing unless told).

Usage: progress_steps.py STEPS [TOTAL]
  STEPS  steps to make (each calls progress(step, TOTAL)); TOTAL: the total given to progress (default: none)
Environment:
  STEP_PACE      seconds per step (default 0.05)
  FAIL_RANK      the rank that SIGKILLs itself (default: none) ...
  FAIL_STEP      ... after reporting this step (default 3) ...
  FAIL_ATTEMPTS  ... in these attempts (MALAUNCH_ATTEMPT, comma-separated; default 0)
  FAIL_COUNTER   the variable that numbers those attempts (default MALAUNCH_ATTEMPT; TORCHELASTIC_RESTART_COUNT
                 under a torchrun that restarts by itself)
  HOLD_FILE      after the last step, wait until this file exists before exiting (a test looks meanwhile)
  STEP_PRINT     1: print a line per step (default: print nothing)
  PROGRESS_UNTIL call progress() only up to this step (default: every step)
"""

from __future__ import annotations

import os
import signal
import sys
import time

from malaunch.entrypoint import checkpoint

steps = int(sys.argv[1])
total = int(sys.argv[2]) if len(sys.argv) > 2 else None
pace = float(os.environ.get("STEP_PACE", "0.05"))
rank, _ = checkpoint.rank_and_size()
attempt = int(os.environ.get(os.environ.get("FAIL_COUNTER", "MALAUNCH_ATTEMPT"), "0") or "0")
fail_rank = os.environ.get("FAIL_RANK")
fail_step = int(os.environ.get("FAIL_STEP", "3"))
fail_attempts = {int(x) for x in os.environ.get("FAIL_ATTEMPTS", "0").split(",") if x}
until = int(os.environ.get("PROGRESS_UNTIL", str(steps)))
failing = fail_rank is not None and int(fail_rank) == rank and attempt in fail_attempts
for step in range(1, steps + 1):
    time.sleep(pace)
    if step <= until:
        checkpoint.progress(step, total)
    if os.environ.get("STEP_PRINT") == "1":
        print(f"rank {rank} step {step}", flush=True)
    if failing and step == fail_step:
        os.kill(os.getpid(), signal.SIGKILL)
hold = os.environ.get("HOLD_FILE")
while hold and not os.path.exists(hold):
    time.sleep(0.05)
