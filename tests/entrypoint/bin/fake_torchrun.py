"""Imitates torchrun --tee=3 with TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[rank${rank}]:" for supervisor tests.

``fake_torchrun.py --nproc N [--no-summary] -- WORKER_ARGS...`` starts N copies of worker.py, each in its own
session with RANK/LOCAL_RANK set, copies every line they write to its own stdout/stderr with the
``[rankN]:`` prefix, and prints launcher lines of its own. When a worker fails it SIGTERMs the others'
process groups (SIGKILL after 5 s), prints torchrun's failure summary to stderr and exits 1, as torchrun does.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO, List

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
LOCK = threading.Lock()


def copy(stream: IO[bytes], rank: int, target: IO[bytes]) -> None:
    for line in iter(stream.readline, b""):
        with LOCK:
            target.write(b"[rank%d]:" % rank + line)
            target.flush()


def say(text: str) -> None:
    with LOCK:
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--no-summary", action="store_true")
    parser.add_argument("worker_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    worker_args = [a for a in args.worker_args if a != "--"]
    say(f"starting {args.nproc} workers")
    procs: List[subprocess.Popen[bytes]] = []
    threads = []
    for rank in range(args.nproc):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank)}
        proc = subprocess.Popen(
            [sys.executable, WORKER, *worker_args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        procs.append(proc)
        assert proc.stdout is not None and proc.stderr is not None
        for stream, target in ((proc.stdout, sys.stdout.buffer), (proc.stderr, sys.stderr.buffer)):
            thread = threading.Thread(target=copy, args=(stream, rank, target))
            thread.start()
            threads.append(thread)

    def on_term(signum: int, frame: object) -> None:
        say(f"Received {signum} death signal, shutting down workers")
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signum)
        sys.exit(1)

    signal.signal(signal.SIGTERM, on_term)
    failed = None
    while failed is None:
        codes = [proc.poll() for proc in procs]
        failed = next((i for i, code in enumerate(codes) if code not in (None, 0)), None)
        if failed is None and all(code == 0 for code in codes):
            break
        time.sleep(0.05)
    if failed is not None:
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
    for thread in threads:
        thread.join()
    if failed is None:
        say("all workers succeeded")
        return 0
    if not args.no_summary:
        others = "\n".join(
            OTHER.format(i=n, rank=i, code=proc.returncode, pid=proc.pid)
            for n, (i, proc) in enumerate((i, p) for i, p in enumerate(procs) if i != failed)
        )
        bad = procs[failed]
        with LOCK:
            sys.stderr.write(SUMMARY.format(others=others, rank=failed, code=bad.returncode, pid=bad.pid))
            sys.stderr.flush()
    return 1


if __name__ == "__main__":
    sys.exit(main())
