"""Start-up worker: records when it began running, as its very first act, then exits 0.

Imports only os and time. Writes ``$BENCH_OUT/start-<pid>`` holding ``time.monotonic()`` (one system-wide
clock on Linux, so the harness can compare it with its own launch time). Under msrun the scheduler runs this
same script with ``MS_ROLE=MS_SCHED``; it is not a rank and writes nothing.
"""

import os
import time

STARTED = time.monotonic()

if os.environ.get("MS_ROLE") != "MS_SCHED":
    path = os.path.join(os.environ["BENCH_OUT"], "start-" + str(os.getpid()))
    with open(path + ".tmp", "w") as handle:
        handle.write(repr(STARTED))
    os.rename(path + ".tmp", path)
