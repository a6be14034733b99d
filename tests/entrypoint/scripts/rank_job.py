"""A plain rank script (no torch) for root-cause, helper, daemon and live-output tests.

The rank comes from RANK (torchrun, fan-out) or MS_NODE_ID/RANK_ID (msrun).
  --fail-rank R --mode exit|kill --code C   rank R exits with C (or SIGKILLs itself) after --delay seconds
  --sleep S                                  every other rank sleeps S seconds, then exits 0
  --helper-exit N                            every rank first runs a helper subprocess that exits N
  --daemon DIR                               rank 0 starts a double-forked, setsid'd daemon with an empty
                                             environment that sleeps; its pid goes to DIR/daemon.pid
  --daemon-first DIR                         the same, as the very first thing the rank does (before any
                                             import but os and sys: the earliest a rank can leave a process)
  --say TEXT                                 print TEXT (no flush: PYTHONUNBUFFERED decides) before sleeping
  --lines N                                  print N numbered lines first
"""

import os
import sys


def start_daemon(folder):
    """A double-forked, setsid'd daemon with an empty environment; its pid goes to folder/daemon.pid."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(os.path.join(folder, "daemon.pid.tmp"), "w") as fh:
                fh.write(str(os.getpid()))
            os.replace(os.path.join(folder, "daemon.pid.tmp"), os.path.join(folder, "daemon.pid"))
            os.execve("/bin/sleep", ["sleep", "300"], {})
        os._exit(0)


if "--daemon-first" in sys.argv and (os.environ.get("RANK") or os.environ.get("RANK_ID") or "0") == "0":
    start_daemon(sys.argv[sys.argv.index("--daemon-first") + 1])

import argparse  # noqa: E402  (after the earliest daemon on purpose)
import signal  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--mode", default="exit")
parser.add_argument("--code", type=int, default=1)
parser.add_argument("--delay", type=float, default=0.0)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--helper-exit", type=int, default=None)
parser.add_argument("--daemon", default="")
parser.add_argument("--daemon-first", default="")
parser.add_argument("--say", default="")
parser.add_argument("--lines", type=int, default=0)
parser.add_argument("--ignore-term", action="store_true")
args = parser.parse_args()

raw = os.environ.get("MS_NODE_ID") or os.environ.get("RANK_ID") or os.environ.get("RANK") or "0"
rank = int(raw)
if args.ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if args.helper_exit is not None:
    done = subprocess.run([sys.executable, "-c", f"import sys; sys.exit({args.helper_exit})"], check=False)
    print(f"rank {rank}: helper exited {done.returncode}", flush=True)
if args.daemon and rank == 0:
    start_daemon(args.daemon)
    while not os.path.exists(os.path.join(args.daemon, "daemon.pid")):
        time.sleep(0.01)
for number in range(args.lines):
    sys.stdout.write(f"rank {rank} line {number} {'x' * 60}\n")
sys.stdout.flush()
if rank == args.fail_rank:
    time.sleep(args.delay)
    print(f"rank {rank} failing on purpose", flush=True)
    if args.mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(args.code)
if args.say:
    sys.stdout.write(args.say + "\n")
time.sleep(args.sleep)
