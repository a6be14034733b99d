"""Local backend: a 4 hosts x 4 ranks job, submit -> done, through the SDK (``Job(...).submit()``).

Each sample runs ``workers/local_submit.py`` in a marked subprocess with a fresh backend home and a code folder
holding a trivial ``train.py``; that client times ``submit()`` -> the job's terminal state (polled every
20 ms) and prints JSON. If the SDK or its local backend is not there yet the case reports "not available"
instead of failing.
"""

from __future__ import annotations

import json
import shutil
from typing import Optional

from .procs import PYTHON, WORKERS, BenchError, bench_env, new_mark, scratch_dir, start, tail
from .results import CaseResult, Series, fmt_value, say

__all__ = ["HOSTS", "RANKS_PER_HOST", "run_local_backend"]

HOSTS = 4
RANKS_PER_HOST = 4


def measure_once() -> tuple[Optional[float], str]:
    """(seconds submit -> done, note) or (None, why it is not available)."""
    scratch = scratch_dir("local")
    try:
        code = scratch / "code"
        code.mkdir()
        (code / "train.py").write_text("import os\nprint('rank', os.environ.get('RANK_ID'), 'done')\n")
        mark = new_mark()
        argv = [
            PYTHON,
            str(WORKERS / "local_submit.py"),
            str(code),
            "--hosts",
            str(HOSTS),
            "--devices",
            str(RANKS_PER_HOST),
        ]
        run = start(
            "local backend",
            argv,
            bench_env(mark, {"MALAUNCH_HOME": str(scratch / "home")}),
            scratch,
            stdout=scratch / "stdout.txt",
            stderr=scratch / "stderr.txt",
        )
        try:
            run.wait_exit(400.0)
        finally:
            run.cleanup()
        lines = (scratch / "stdout.txt").read_text().strip().splitlines()
        if run.proc.returncode != 0 or not lines:
            raise BenchError(f"local backend client exited with {run.proc.returncode}:\n{tail(scratch / 'stderr.txt')}")
        data = json.loads(lines[-1])
        if not data.get("available"):
            return None, str(data.get("why", "not available"))
        if data.get("state") != "SUCCEEDED":
            raise BenchError(f"local backend: the job ended {data.get('state')} (exit {data.get('exit_code')})")
        return float(data["total"]), f"submit() returned after {fmt_value(float(data['submit']), 's')}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_local_backend(reps: int) -> CaseResult:
    """Run the job ``reps`` times; a missing backend gives a series whose error is "not available: ..."."""
    item = Series(
        "local/4x4",
        "local backend",
        "Job(...).submit() -> done (local backend)",
        f"{HOSTS} hosts x {RANKS_PER_HOST} ranks",
        "s",
    )
    notes = []
    for rep in range(reps):
        try:
            value, note = measure_once()
        except BenchError as exc:
            item.error = str(exc).splitlines()[0]
            say(f"  local backend rep {rep + 1}/{reps}: FAILED: {exc}")
            break
        if value is None:
            item.error = f"not available ({note})"
            say(f"  local backend: not available: {note}")
            break
        item.samples.append(value)
        notes.append(note)
        say(f"  local backend rep {rep + 1}/{reps}: {fmt_value(value, 's')} ({note})")
    if notes:
        item.note = notes[len(notes) // 2] + "; status polled every 20 ms"
    result = CaseResult("local backend", [item])
    result.notes.append(
        "local backend = Job(...).submit() -> the job's terminal state, a trivial rank-table boot file, "
        f"{HOSTS} emulated hosts x {RANKS_PER_HOST} ranks; no target."
    )
    return result
