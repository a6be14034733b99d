"""Imitates ``msrun --join=True`` for supervisor tests (MindSpore 2.10 behaviour, see launchers.md 2.4).

``fake_msrun.py --log-dir D --workers N [--late-rank R] [--no-kill] [--scheduler-wait S] -- WORKER_ARGS...``
starts a scheduler (in msrun's own process group, ``MS_ROLE=MS_SCHED RANK_ID=0``) and N workers, each in a
session of its own with ``MS_NODE_ID=i RANK_ID=i``, output to ``D/worker_i.log`` (rank R's file appears
0.6 s late). It polls the workers; on the first failure it logs "Worker process <pid> exit with exception.
Error code: <rc>.", SIGKILLs the other workers (unless --no-kill) and then waits for the scheduler, which
only gives up after --scheduler-wait seconds: a supervisor that waits for msrun waits that long.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from typing import List, Optional

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")


def log(text: str) -> None:
    sys.stdout.write(f"[INFO] ME({os.getpid()},fake,MainProcess):2026-11-22 [_api.py:1] {text}\n")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--late-rank", type=int)
    parser.add_argument("--no-kill", action="store_true")
    parser.add_argument("--scheduler-wait", type=float, default=120.0)
    parser.add_argument("--scheduler-done", help="the scheduler touches this file when it ends by itself")
    parser.add_argument("worker_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    worker_args = [a for a in args.worker_args if a != "--"]
    os.makedirs(args.log_dir, exist_ok=True)
    with open(os.path.join(args.log_dir, "scheduler.log"), "w") as sched_log:
        scheduler = subprocess.Popen(
            [sys.executable, "-c", SCHEDULER, str(args.scheduler_wait), args.scheduler_done or ""],
            env={**os.environ, "MS_ROLE": "MS_SCHED", "RANK_ID": "0"},
            stdout=sched_log,
            stderr=subprocess.STDOUT,
        )
    log("Start scheduler process, log file:scheduler.log")
    workers: List[Optional[subprocess.Popen[bytes]]] = [None] * args.workers
    start_late = time.monotonic() + 0.6

    def start(i: int) -> None:
        path = os.path.join(args.log_dir, f"worker_{i}.log")
        with open(path, "w") as handle:
            workers[i] = subprocess.Popen(
                [sys.executable, WORKER, *worker_args],
                env={**os.environ, "MS_ROLE": "MS_WORKER", "MS_NODE_ID": str(i), "RANK_ID": str(i)},
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        log(f"Start worker process with rank id:{i}, log file:{path}. Environment variable [RANK_ID={i}] is exported.")

    for i in range(args.workers):
        if i != args.late_rank:
            start(i)
    while True:
        if args.late_rank is not None and workers[args.late_rank] is None and time.monotonic() > start_late:
            start(args.late_rank)
        live = [w for w in workers if w is not None]
        failed = next((w for w in live if w.poll() not in (None, 0)), None)
        if failed is not None:
            sys.stderr.write(
                f"[ERROR] ME({os.getpid()},fake,MainProcess):2026-11-22 [_api.py:312] Worker process "
                f"{failed.pid} exit with exception. Error code: {failed.returncode}.\n"
            )
            sys.stderr.flush()
            if not args.no_kill:
                for w in live:
                    if w is not failed and w.poll() is None:
                        os.killpg(w.pid, signal.SIGKILL)
            scheduler.wait()  # msrun waits for the scheduler without a timeout
            sys.stderr.write("RuntimeError: Distributed job exited with exception. Please check logs.\n")
            return 1
        if len(live) == args.workers and all(w.poll() == 0 for w in live):
            scheduler.kill()
            scheduler.wait()
            log("Distributed job finished")
            return 0
        time.sleep(0.1)


SCHEDULER = """
import sys, time
time.sleep(float(sys.argv[1]))
if sys.argv[2]:
    open(sys.argv[2], "w").close()
"""

if __name__ == "__main__":
    sys.exit(main())
