"""Imitates torchrun --redirects=3 --log_dir=DIR for supervisor tests.

``fake_torchrun.py --nproc N --log-dir DIR [--attempts K] [--no-summary] [--linger S] -- WORKER_ARGS...`` makes a
run folder ``DIR/<run id>_<random>`` as torchrun does (``tempfile.mkdtemp``) and, for each attempt ``k`` (K attempts one
after another, all but the last succeed only if their workers do), starts N copies of worker.py, each in its own
session with RANK/LOCAL_RANK set (and TORCHELASTIC_RESTART_COUNT when K > 1) and its stdout and stderr the files
``attempt_<k>/<local rank>/stdout.log`` and ``stderr.log``, which the worker writes itself. It prints launcher
lines of its own. When a worker fails it SIGTERMs the others' process groups (SIGKILL after 5 s), prints
torchrun's failure summary to stderr and exits 1, as torchrun does. With ``--linger S`` it stays S seconds after
its workers succeeded, saying nothing, as torchrun's agent does in its exit barrier or while its store closes.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import List, Optional

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")


def say(text: str) -> None:
    sys.stderr.buffer.write(f"W0101 00:00:00.000000 {os.getpid()} torch/distributed/run.py:1] {text}\n".encode())
    sys.stderr.buffer.flush()


SUMMARY = """Traceback (most recent call last):
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
worker.py FAILED
------------------------------------------------------------
Failures:
{others}
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-22_02:44:43
  host      : fakehost
  rank      : {rank} (local_rank: {rank})
  exitcode  : {code} (pid: {pid})
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""

OTHER = """[{i}]:
  time      : 2026-11-22_02:44:43
  host      : fakehost
  rank      : {rank} (local_rank: {rank})
  exitcode  : {code} (pid: {pid})
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"""


def start_group(
    nproc: int, attempt_dir: str, attempt: int, restarts: bool, worker_args: List[str]
) -> List[subprocess.Popen[bytes]]:
    procs: List[subprocess.Popen[bytes]] = []
    for rank in range(nproc):
        folder = os.path.join(attempt_dir, str(rank))
        os.makedirs(folder)
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank)}
        if restarts:
            env["TORCHELASTIC_RESTART_COUNT"] = str(attempt)
        stdout, stderr = os.path.join(folder, "stdout.log"), os.path.join(folder, "stderr.log")
        with open(stdout, "wb") as out, open(stderr, "wb") as err:
            worker = subprocess.Popen(
                [sys.executable, WORKER, *worker_args], env=env, stdout=out, stderr=err, start_new_session=True
            )
        procs.append(worker)
    return procs


def wait_group(procs: List[subprocess.Popen[bytes]]) -> Optional[int]:
    """Wait until every worker succeeded (None) or one failed (its index; the others are ended)."""
    failed = None
    while failed is None:
        codes = [proc.poll() for proc in procs]
        failed = next((i for i, code in enumerate(codes) if code not in (None, 0)), None)
        if failed is None and all(code == 0 for code in codes):
            return None
        time.sleep(0.05)
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(proc.poll() is None for proc in procs):
        time.sleep(0.05)
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return failed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--log-dir", "--log_dir", dest="log_dir", required=True)
    parser.add_argument("--attempts", type=int, default=1)
    parser.add_argument("--no-summary", action="store_true")
    parser.add_argument("--linger", type=float, default=0.0)
    parser.add_argument("worker_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    worker_args = [a for a in args.worker_args if a != "--"]
    os.makedirs(args.log_dir, exist_ok=True)
    run_dir = tempfile.mkdtemp(prefix="fake-run-id_", dir=args.log_dir)
    say(f"starting {args.nproc} workers")
    procs: List[subprocess.Popen[bytes]] = []

    def on_term(signum: int, frame: object) -> None:
        say(f"Received {signum} death signal, shutting down workers")
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signum)
        sys.exit(1)

    signal.signal(signal.SIGTERM, on_term)
    failed = None
    for attempt in range(args.attempts):
        attempt_dir = os.path.join(run_dir, f"attempt_{attempt}")
        procs = start_group(args.nproc, attempt_dir, attempt, args.attempts > 1, worker_args)
        failed = wait_group(procs)
        if failed is not None:
            break
    if failed is None:
        time.sleep(args.linger)
        say("all workers succeeded")
        return 0
    if not args.no_summary:
        others = "\n".join(
            OTHER.format(i=n, rank=i, code=proc.returncode, pid=proc.pid)
            for n, (i, proc) in enumerate((i, p) for i, p in enumerate(procs) if i != failed)
        )
        bad = procs[failed]
        sys.stderr.write(SUMMARY.format(others=others, rank=failed, code=bad.returncode, pid=bad.pid))
        sys.stderr.flush()
    return 1


if __name__ == "__main__":
    sys.exit(main())
