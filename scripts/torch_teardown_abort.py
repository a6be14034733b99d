"""Reproduce torch 2.13's gloo abort after a finished run, and count it (issue 43.4). Not a test: the abort is rare.

  python scripts/torch_teardown_abort.py [--runs N] [--case template|async] [--import after|before]
                                         [--ending return|exit_now] [--cores DIR]

Each run is ``torchrun --standalone --nproc_per_node=2`` of this very file as the worker: it joins a gloo group
on 127.0.0.1, all-reduces one number, passes a barrier, calls ``destroy_process_group()``, prints a marker line
with the gloo threads still alive, and then ends as ``--ending`` says:

- ``return``: ``sys.exit(0)``, through the interpreter's own teardown (how a training script usually ends);
- ``exit_now``: stdout and stderr flushed, then ``os._exit(0)`` (no teardown).

``--import`` says when the worker imports ``torch.distributed.nn``: ``after`` ``init_process_group`` (default),
as the first optimizer a script makes does (``torch.optim`` loads ``torch._dynamo``, which loads it), or
``before``. Its ten collectives take ``group=group.WORLD`` as a default argument, evaluated at import: imported
after the group exists, they keep it, ``destroy_process_group()`` frees nothing, and gloo's threads
(``gloo_tcp_loop``, two ``pt_gloo_runloop``) live on into the interpreter's teardown; imported before, the default
is None and the group is gone when ``destroy_process_group()`` returns.

``--case async`` is the abort reduced to its cause (docs/recovery.md shows the native stack): each rank starts an
asynchronous all-reduce, drops the work at once and ends, so the gloo worker thread (``pt_gloo_runloop``) holds the
work's last reference. It finishes the work while the interpreter tears down and drops it; the tensor it holds is
a Python object, the worker thread asks for the GIL to release it, a finalizing Python 3.11 ends any thread that
asks (``pthread_exit``), and that unwind through torch's ``noexcept`` destructor is ``std::terminate``.

A run is *aborted* when a rank died of SIGABRT after its marker line (torch printed ``terminate called without an
active exception``); *failed* when it ended otherwise than 0 for another reason. The counts go to stdout, one run
a line, then a summary. With ``--cores DIR`` the ranks may dump core there (``ulimit -c unlimited`` in this
process; the kernel's ``core_pattern`` must name a relative file, such as its default ``core``): each run works in
``DIR/run-N`` and the folders of clean runs are removed, so what is left is the runs to look at with gdb (``gdb
PYTHON DIR/run-N/core``, ``thread apply all bt``). Run it under ``nice``: it is meant to loop for minutes.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from typing import List, Optional, Tuple

MARKER = "teardown-repro: group destroyed"
ABORT = "terminate called without an active exception"


def gloo_threads() -> List[str]:
    """The names of this process's gloo threads (``/proc/self/task/*/comm``)."""
    names = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/comm", encoding="utf-8") as handle:
            names.append(handle.read().strip())
    return sorted(name for name in names if "gloo" in name)


def worker(ending: str, order: str, case: str = "template") -> None:
    """One rank: the template's ending in a few lines (join, all-reduce, barrier, destroy, exit), or (``case``
    ``async``) the abort reduced: an asynchronous all-reduce whose work is dropped at once, then the script's end."""
    import torch
    import torch.distributed as dist

    if case == "async":
        dist.init_process_group("gloo", init_method="env://")
        dist.all_reduce(torch.ones(1 << 20), async_op=True)  # gloo's worker thread now holds the work's last reference
        print(f"{MARKER} (rank {os.environ.get('RANK')}: not destroyed, the all-reduce in flight)", flush=True)
        if ending == "exit_now":
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        sys.exit(0)

    if order == "before":
        import torch.distributed.nn
    dist.init_process_group("gloo", init_method="env://")
    if order == "after":
        import torch.distributed.nn
    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    dist.barrier()
    dist.destroy_process_group()
    print(f"{MARKER} (rank {os.environ.get('RANK')}, sum {value.item():g}), gloo threads left: {gloo_threads()}",
          flush=True)  # fmt: skip
    if ending == "exit_now":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    sys.exit(0)


def one_run(ending: str, order: str, folder: str, case: str = "template") -> Tuple[str, bool]:
    """``ok``, ``aborted`` or ``failed`` for one torchrun of two ranks in ``folder``, and whether a rank still had
    gloo threads after ``destroy_process_group()``."""
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            os.path.abspath(__file__), "--worker", ending, "--import", order, "--case", case]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    done = subprocess.run(argv, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    text = done.stdout.decode("utf-8", "replace")
    with open(os.path.join(folder, "torchrun.out"), "w", encoding="utf-8") as handle:
        handle.write(text)
    left = any(MARKER in line and line.rstrip().endswith("']") for line in text.splitlines())
    if done.returncode == 0:
        return "ok", left
    after = text.count(MARKER) == 2 and ABORT in text.split(MARKER, 1)[1]
    return ("aborted" if after and "SIGABRT" in text else "failed"), left


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40, help="how many torchruns (default 40)")
    parser.add_argument("--ending", choices=("return", "exit_now"), default="return")
    parser.add_argument("--import", dest="order", choices=("after", "before"), default="after")
    parser.add_argument("--case", choices=("template", "async"), default="template",
                        help="template: the template's ending; async: the abort reduced (see docs/recovery.md)")
    parser.add_argument("--cores", default=None, help="a folder for the runs, kept with their cores when not ok")
    parser.add_argument("--worker", choices=("return", "exit_now"), help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker:
        worker(options.worker, options.order, options.case)
        return 0
    if options.runs < 1:
        parser.error(f"--runs must be at least 1, got {options.runs}")
    base = options.cores or tempfile.mkdtemp(prefix="teardown-repro-")
    if options.cores:
        os.makedirs(base, exist_ok=True)
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    counts = {"ok": 0, "aborted": 0, "failed": 0}
    kept = 0  # runs in which a rank's gloo threads outlived destroy_process_group()
    for number in range(1, options.runs + 1):
        folder = os.path.join(base, f"run-{number}")
        os.makedirs(folder, exist_ok=True)
        outcome, left = one_run(options.ending, options.order, folder, options.case)
        counts[outcome] += 1
        kept += left
        print(f"run {number}: {outcome}{', gloo threads left after destroy_process_group' if left else ''}",
              flush=True)  # fmt: skip
        if outcome == "ok" or not options.cores:
            shutil.rmtree(folder, ignore_errors=True)
    if not options.cores:
        shutil.rmtree(base, ignore_errors=True)
    print(f"case {options.case}, import {options.order}, ending {options.ending}: {counts['aborted']} aborted, "
          f"{counts['failed']} failed "
          f"otherwise, {counts['ok']} ok, of {options.runs} runs of two ranks; gloo threads outlived "
          f"destroy_process_group() in {kept}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
