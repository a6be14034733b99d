"""Follow-latency rank: once the file ``$LATENCY_GO`` exists, prints ``$LATENCY_LINES`` lines at random intervals.

The job's boot file in the ``latency`` case. Each line is ``stamp <i> <time.monotonic()>``, the clock read just
before the line is written and flushed; intervals are uniform between ``$LATENCY_MIN_GAP`` and
``$LATENCY_MAX_GAP`` seconds (seeded, so every run writes the same sequence). Until the go file exists the rank
is quiet: the follower's idle CPU is read meanwhile.
"""

from __future__ import annotations

import os
import random
import sys
import time


def main() -> None:
    go = os.environ["LATENCY_GO"]
    lines = int(os.environ.get("LATENCY_LINES", "200"))
    low = float(os.environ.get("LATENCY_MIN_GAP", "0.005"))
    high = float(os.environ.get("LATENCY_MAX_GAP", "0.045"))
    while not os.path.exists(go):
        time.sleep(0.02)
    rng = random.Random(28)
    for index in range(lines):
        time.sleep(rng.uniform(low, high))
        sys.stdout.write(f"stamp {index} {time.monotonic():.6f}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
