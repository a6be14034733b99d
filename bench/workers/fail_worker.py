"""Teardown worker: one rank fails once every rank is up; the others sleep and honour SIGTERM.

Environment: ``BENCH_OUT`` (a folder), ``BENCH_NRANKS`` (ranks in the job), ``BENCH_FAIL_RANK`` (default 1).
The rank comes from ``RANK`` (rank-table fan-out, torchrun) or, with ``--ms-init``, from MindSpore after
``mindspore.communication.init()`` (msrun: the realistic case, a rank failing after the cluster formed).

Each rank writes ``ready-<rank>``. The failing rank waits until all ranks are ready (plus 0.2 s so the
others are asleep), writes ``fail-<rank>`` holding ``time.monotonic()`` and calls ``os._exit(1)`` at once.
The others sleep; SIGTERM ends them with 143. If nothing ends them within BENCH_MAX_SLEEP seconds (default
900) they exit 3, so a launcher that never tears down shows up as a timeout, not a hang.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from types import FrameType
from typing import Optional


def _on_term(signum: int, frame: Optional[FrameType]) -> None:
    os._exit(128 + signum)


def _stamp(path: str, value: float) -> None:
    with open(path + ".tmp", "w") as handle:
        handle.write(repr(value))
    os.rename(path + ".tmp", path)


def _rank() -> int:
    if "--ms-init" in sys.argv[1:]:
        import mindspore as ms
        from mindspore.communication import get_rank, init

        ms.set_context(mode=ms.PYNATIVE_MODE)
        ms.set_device("CPU")
        init()  # the msrun scheduler (MS_ROLE=MS_SCHED) never returns from here
        return int(get_rank())
    return int(os.environ["RANK"])


def main() -> None:
    out = os.environ["BENCH_OUT"]
    ranks = int(os.environ["BENCH_NRANKS"])
    fail_rank = int(os.environ.get("BENCH_FAIL_RANK", "1"))
    rank = _rank()
    signal.signal(signal.SIGTERM, _on_term)
    _stamp(os.path.join(out, f"ready-{rank}"), time.monotonic())
    if rank == fail_rank:
        deadline = time.monotonic() + 600
        while len([n for n in os.listdir(out) if n.startswith("ready-") and not n.endswith(".tmp")]) < ranks:
            if time.monotonic() > deadline:
                os._exit(4)
            time.sleep(0.01)
        time.sleep(0.2)
        _stamp(os.path.join(out, f"fail-{rank}"), time.monotonic())
        os._exit(1)
    time.sleep(float(os.environ.get("BENCH_MAX_SLEEP", "900")))
    os._exit(3)


if __name__ == "__main__":
    main()
