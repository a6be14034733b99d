"""The rank script of the golden captures: same output, same order, every run.

``job.py MODE WORLD`` where MODE is one of
  ok     every rank prints one line on stdout (rank 0 one on stderr too), then exits 0;
  exit   as ok, then rank 1 waits until every rank has started and exits 3 (the others wait to be ended);
  kill   as exit, but rank 1 SIGKILLs itself;
  hang   every rank prints its lines and waits to be ended (the capture SIGTERMs the shim once all are ready);
  flaky  attempt 0 (``TORCHELASTIC_RESTART_COUNT``) behaves as ``exit``, later attempts as ``ok``.

Every rank marks itself ready with an empty file ``$GOLDEN_READY/<attempt>-<rank>`` after printing, so the
capture knows when to signal and the failing rank fails only once every rank runs (teardown is then the same
every time). The rank comes from ``RANK`` (fan-out, torchrun) or ``RANK_ID``/``MS_NODE_ID`` (msrun); an msrun
scheduler (``MS_ROLE=MS_SCHED``) exits 0 at once.
"""

import os
import signal
import sys
import time

mode, world = sys.argv[1], int(sys.argv[2])
if os.environ.get("MS_ROLE") == "MS_SCHED":
    sys.exit(0)
rank = int(os.environ.get("RANK") or os.environ.get("RANK_ID") or os.environ.get("MS_NODE_ID") or "0")
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or "0")
ready = os.environ["GOLDEN_READY"]
if mode == "flaky":
    mode = "exit" if attempt == 0 else "ok"
sys.stdout.write(f"rank {rank} attempt {attempt}: started\n")
sys.stdout.flush()
if rank == 0:  # only rank 0 uses stderr: a rank's two pipes reach its log file in either order
    sys.stderr.write(f"rank {rank}: a line on stderr\n")
    sys.stderr.flush()
with open(os.path.join(ready, f"{attempt}-{rank}"), "w"):
    pass
if mode == "ok":
    sys.exit(0)
if mode in ("exit", "kill") and rank == 1:
    deadline = time.monotonic() + 60
    while len([n for n in os.listdir(ready) if n.startswith(f"{attempt}-")]) < world:
        if time.monotonic() > deadline:
            sys.exit(99)
        time.sleep(0.05)
    sys.stdout.write(f"rank {rank}: failing on purpose ({mode})\n")
    sys.stdout.flush()
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(3)
time.sleep(120)
sys.exit(98)
