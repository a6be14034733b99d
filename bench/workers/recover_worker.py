"""Time-to-recover worker: a data-parallel training loop on gloo that stamps its first step of each attempt.

Environment: ``BENCH_OUT`` (a folder). The rank and the world come from ``RANK``/``WORLD_SIZE`` with
``MASTER_ADDR``/``MASTER_PORT`` (the fan-out, torchrun).

Each start writes ``pid-<pid>`` (its rank), joins the process group, then steps: an all_reduce of a small
tensor, ``checkpoint.progress(step)``, a 50 ms pause. After its first step it writes ``first-<pid>`` holding
``time.time()``: the "first step" every figure of the case ends at. Files are named by the process, not by the
attempt: torchrun's agents give the workers of one restart different restart counts (an agent that restarts for
another's failure does not count it). It runs until it is ended (SIGTERM, SIGKILL) or for BENCH_MAX_SECONDS
(default 600), then exits 3.
"""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist
from malaunch.entrypoint import checkpoint


def _stamp(path: str, value: str) -> None:
    with open(path + ".tmp", "w") as handle:
        handle.write(value)
    os.rename(path + ".tmp", path)


def main() -> int:
    out = os.environ["BENCH_OUT"]
    rank = int(os.environ.get("RANK", "0"))
    _stamp(os.path.join(out, f"pid-{os.getpid()}"), str(rank))
    dist.init_process_group("gloo")
    tensor = torch.ones(4)
    deadline = time.monotonic() + float(os.environ.get("BENCH_MAX_SECONDS", "600"))
    step = 0
    while time.monotonic() < deadline:
        dist.all_reduce(tensor)
        step += 1
        if step == 1:
            _stamp(os.path.join(out, f"first-{os.getpid()}"), repr(time.time()))
        checkpoint.progress(step)
        time.sleep(0.05)
    return 3


if __name__ == "__main__":
    raise SystemExit(main())
