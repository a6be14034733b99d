"""Daily-use latency (issue 28): ``logs -f`` of a local job and the 32,768-rank ``--dry-run``, this tree beside main
(or the commit ``bench/run.py --baseline REF`` names).

Both trees run from link farms on ``PYTHONPATH`` (:mod:`.baseline`: the same interpreter and bytecode state, only
the package's code differs), one after the other within each repetition:

- **follow latency**: a real local job (1 host, 1 device) whose rank (``workers/latency_writer.py``) prints
  :data:`LINES` lines at random intervals (5-45 ms), each carrying ``time.monotonic()`` read just before it is
  written; ``ma-submit logs -f JOB`` follows it from another process, and this process stamps each line as it
  reads it from the follower's stdout. ``CLOCK_MONOTONIC`` is one clock for the whole machine, so the difference
  is the lag from the rank's write to the user's terminal: the shim, the console file, the follower, its stdout.
  Each run gives the median and the 90th percentile of its lines (the figures are the median over the runs); a
  lost line fails the run.
- **idle CPU**: before the rank writes anything (it waits for a go file), the follower's CPU time over
  :data:`IDLE_WINDOW` seconds (``/proc/PID/task/*/schedstat``, nanoseconds), as a share of one core.
- **dry-run**: the whole ``ma-entrypoint --dry-run`` process on a 2,048 x 16 v1.0 rank table (this host the
  last server), against ``python -c pass`` run with the same interpreter and environment in the same repetition;
  "over the bare interpreter" is the difference within each repetition. ``ma-submit --dry-run`` of a job of that
  size (2,048 hosts x 16 devices, Volcano: the platform writes the table) is timed as well, for information.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from .baseline import FARMS, prepare_farms
from .commands import v10_rank_table
from .procs import PYTHON, WORKERS, BenchError, bench_env, kill_marked, new_mark, scratch_dir, tail
from .results import CaseResult, Series, Target, fmt_value, say

__all__ = ["BASE_REF", "IDLE_WINDOW", "LINES", "run_latency"]

BASE_REF = "main"
LINES = 200
IDLE_WINDOW = 5.0
SERVERS = 2048
DEVICES = 16
_MA_SUBMIT = os.path.join(os.path.dirname(PYTHON), "ma-submit")
_LATENCY_BOUND = 0.020  # the issue: a line shown within 20 ms (median) of the rank writing it
_IDLE_BOUND = 1.0  # % of one core: what "near 0 %" is taken to mean for an idle follower
_DRY_BOUND = 0.050  # the issue: --dry-run of a 32,768-rank table < 50 ms over a bare interpreter
_DRY_RUNS_PER_REP = 3  # the dry-run is short and the machine shared: more runs steady its median

_JOB = """name: latency
run_method: ranktable
code_dir: {code}
boot_file: train.py
resources:
  hosts: 1
  devices_per_host: 1
env:
  LATENCY_GO: "{go}"
  LATENCY_LINES: "{lines}"
"""

_BIG_JOB = """name: dryrun-scale
run_method: ranktable
code_dir: {code}
boot_file: train.py
image: registry.example.com/ml/malaunch:0.1.0
resources:
  hosts: {servers}
  devices_per_host: {devices}
volcano:
  queue: default
"""


def _cpu_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid`` so far (schedstat's nanoseconds; clock ticks where it is missing)."""
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as handle:
                total += int(handle.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _submit(env: Mapping[str, str], job: Path, cwd: Path) -> str:
    done = subprocess.run([PYTHON, _MA_SUBMIT, "--detach", str(job)], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=180)  # fmt: skip
    if done.returncode != 0 or not done.stdout.strip():
        raise BenchError(f"ma-submit --detach exited with {done.returncode}: {done.stderr.strip()[-400:]}")
    return done.stdout.strip().splitlines()[-1]


def _follow_once(farm: Path, scratch: Path) -> Tuple[List[float], float]:
    """One local job followed by ``ma-submit logs -f``: (each line's lag in s, the idle follower's CPU in %)."""
    code = scratch / "code"
    code.mkdir()
    shutil.copy(WORKERS / "latency_writer.py", code / "train.py")
    go = scratch / "go"
    job = scratch / "job.yaml"
    job.write_text(_JOB.format(code=code, go=go, lines=LINES))
    mark = new_mark()
    env = bench_env(mark, {"MALAUNCH_HOME": str(scratch / "home"), "PYTHONPATH": str(farm)})
    lags: List[float] = []
    try:
        job_id = _submit(env, job, scratch)
        with open(scratch / "follower-stderr.txt", "wb") as errors:
            follower = subprocess.Popen([PYTHON, _MA_SUBMIT, "logs", "-f", job_id], env=env, cwd=scratch,
                                        stdout=subprocess.PIPE, stderr=errors, start_new_session=True)  # fmt: skip
        assert follower.stdout is not None
        stream = follower.stdout

        def read() -> None:
            for raw in stream:
                now = time.monotonic()
                parts = raw.split()
                if len(parts) >= 3 and parts[-3] == b"stamp":
                    lags.append(now - float(parts[-1]))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        time.sleep(2.0)  # the follower's start-up (imports, the first read of the files)
        before = _cpu_seconds(follower.pid)
        time.sleep(IDLE_WINDOW)
        idle = (_cpu_seconds(follower.pid) - before) / IDLE_WINDOW * 100.0
        go.touch()
        try:
            code_ = follower.wait(timeout=180)
        except subprocess.TimeoutExpired:
            raise BenchError("ma-submit logs -f did not end within 180 s of the job's start") from None
        reader.join(timeout=30)
        if code_ != 0:
            raise BenchError(f"ma-submit logs -f exited with {code_}:\n{tail(scratch / 'follower-stderr.txt')}")
        if len(lags) != LINES:
            raise BenchError(f"ma-submit logs -f showed {len(lags)} of the {LINES} lines the rank wrote")
        return lags, idle
    finally:
        kill_marked(mark)


def _timed(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> Tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of ``argv`` (its CPU time from the rusage of reaped children)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(list(argv), env=dict(env), cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          timeout=120)  # fmt: skip
    took = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise BenchError(f"{' '.join(argv[:4])} exited with {done.returncode}: {done.stderr.decode()[-400:]}")
    return took, (after.ru_utime + after.ru_stime) - (used.ru_utime + used.ru_stime)


def _table_env(scratch: Path) -> Dict[str, str]:
    path = scratch / "jobstart_hccl.json"
    table = v10_rank_table(SERVERS, DEVICES)
    path.write_text(json.dumps(table))
    last = table["server_list"][-1]  # type: ignore[index]
    return {
        "MA_RUN_METHOD": "ranktable",
        "MA_NUM_HOSTS": str(SERVERS),
        "VC_TASK_INDEX": str(SERVERS - 1),
        "MA_VJ_NAME": "bench",
        "MA_TASK_NAME": "worker",
        "RANK_TABLE_FILE": str(path),
        "MA_CURRENT_HOST_IP": str(last["server_id"]),
        "MALAUNCH_LOG_DIR": str(scratch / "logs"),
    }


class _Figures:
    """The series of one tree (``kind``: "baseline" or "this"), shown in the column ``size``."""

    def __init__(self, kind: str, size: str) -> None:
        key = f"latency/{kind}"
        self.median = Series(f"{key}/follow-median", "latency", "logs -f: rank writes -> line shown, median", size, "s")
        self.p90 = Series(f"{key}/follow-p90", "latency", "logs -f: rank writes -> line shown, 90th percentile", size,
                          "s")  # fmt: skip
        self.idle = Series(f"{key}/idle-cpu", "latency", "logs -f idle: CPU share of one core", size, "%")
        self.bare = Series(f"{key}/bare", "latency", "python -c pass (the bare interpreter)", size, "s")
        self.dry = Series(f"{key}/dryrun", "latency", f"ma-entrypoint --dry-run, {SERVERS * DEVICES} ranks", size, "s")
        self.over = Series(f"{key}/dryrun-over-bare", "latency", "ma-entrypoint --dry-run over the bare interpreter",
                           size, "s")  # fmt: skip
        self.over_cpu = Series(f"{key}/dryrun-over-bare-cpu", "latency",
                               "the same in CPU time (user + system, less load-sensitive)", size, "s")
        self.submit = Series(f"{key}/submit-dryrun", "latency",
                             f"ma-submit --dry-run, Volcano {SERVERS} x {DEVICES} (informational)", size, "s")

    def series(self) -> List[Series]:
        return [self.median, self.p90, self.idle, self.dry, self.bare, self.over, self.over_cpu, self.submit]


def _follow_rep(figures: _Figures, farm: Path, scratch: Path) -> None:
    try:
        lags, idle = _follow_once(farm, scratch)
    except BenchError as exc:
        figures.median.error = figures.median.error or str(exc).splitlines()[0]
        return
    figures.median.samples.append(statistics.median(lags))
    figures.p90.samples.append(_p90(lags))
    figures.idle.samples.append(idle)
    say(f"  {figures.median.size}: follow median {fmt_value(statistics.median(lags), 's')}, p90 "
        f"{fmt_value(_p90(lags), 's')}, idle CPU {idle:.2f} %")  # fmt: skip


def _p90(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def _dry_rep(trees: Dict[str, _Figures], scratch: Path, table_env: Mapping[str, str], big_job: Optional[Path],
             order: Sequence[str]) -> None:  # fmt: skip
    boot = str(WORKERS / "start_worker.py")
    for kind in order:
        figures = trees[kind]
        env = bench_env(new_mark(), {**table_env, "PYTHONPATH": str(FARMS[kind]),
                                     "MALAUNCH_HOME": str(scratch / f"home-{kind}")})  # fmt: skip
        try:
            bare, bare_cpu = _timed([PYTHON, "-c", "pass"], env, scratch)
            dry, dry_cpu = _timed([PYTHON, "-m", "malaunch.entrypoint", "--dry-run", boot], env, scratch)
        except BenchError as exc:
            figures.dry.error = str(exc).splitlines()[0]
            continue
        figures.bare.samples.append(bare)
        figures.dry.samples.append(dry)
        figures.over.samples.append(dry - bare)
        figures.over_cpu.samples.append(dry_cpu - bare_cpu)
        if big_job is None:
            continue
        try:
            figures.submit.samples.append(_timed([PYTHON, _MA_SUBMIT, "--dry-run", "--backend", "volcano",
                                                  str(big_job)], env, scratch)[0])  # fmt: skip
        except BenchError as exc:
            figures.submit.error = str(exc).splitlines()[0]


def run_latency(reps: int, follow_reps: int, base_ref: str = BASE_REF) -> CaseResult:
    """``follow_reps`` followed jobs and ``reps`` dry-runs per tree, the trees taking turns."""
    short = prepare_farms(base_ref)
    trees = {"baseline": _Figures("baseline", f"{base_ref} ({short})"), "this": _Figures("this", "this tree")}
    scratch = scratch_dir("latency")
    try:
        for rep in range(follow_reps):
            for kind, figures in trees.items():
                folder = scratch / f"follow-{kind}-{rep}"
                folder.mkdir()
                _follow_rep(figures, FARMS[kind], folder)
        table_env = _table_env(scratch)
        code = scratch / "bigcode"
        code.mkdir()
        (code / "train.py").write_text("print('never run')\n")
        big_job = scratch / "big.yaml"
        big_job.write_text(_BIG_JOB.format(code=code, servers=SERVERS, devices=DEVICES))
        runs = reps * _DRY_RUNS_PER_REP
        for rep in range(runs):
            order = list(trees) if rep % 2 == 0 else list(reversed(trees))
            _dry_rep(trees, scratch, table_env, big_job if rep < reps else None, order)
            this = trees["this"]
            say(f"  dry-run {rep + 1}/{runs}: this tree {fmt_value(_last(this.dry), 's')} (bare "
                f"{fmt_value(_last(this.bare), 's')}), {trees['baseline'].dry.size} "
                f"{fmt_value(_last(trees['baseline'].dry), 's')}")  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result = CaseResult("latency", [item for figures in trees.values() for item in figures.series()])
    result.targets = _targets(trees["this"])
    result.notes = [
        f"follow: {follow_reps} job(s) per tree, {LINES} lines each at 5-45 ms intervals (seeded); the rank's "
        "clock read before its write vs this process's read of the follower's stdout (CLOCK_MONOTONIC); each job's "
        "median and 90th percentile, the figure their median over the jobs.",
        f"idle CPU: the follower's CPU time over {IDLE_WINDOW:.0f} s before the rank writes its first line.",
        f"dry-run: {reps * _DRY_RUNS_PER_REP} repetitions; in each, per tree (the trees taking turns to go first), "
        f"python -c pass then ma-entrypoint --dry-run on a {SERVERS} x {DEVICES} v1.0 table; in the first {reps}, "
        f"then ma-submit --dry-run --backend volcano of {SERVERS} x {DEVICES} too.",
        "The wall times count whatever else this machine runs (see the load average above); the CPU-time row "
        "(rusage of the reaped process, user + system) is what the dry-run itself costs and varies less.",
        "Both trees run from link farms on PYTHONPATH with the same interpreter and bytecode state "
        "(bench/mabench/baseline.py).",
    ]
    return result


def _last(series: Series) -> Optional[float]:
    return series.samples[-1] if series.samples else None


def _targets(this: _Figures) -> List[Target]:
    def target(claim: str, series: Series, bound: float) -> Target:
        value = series.median
        return Target(claim, "not measured" if value is None else fmt_value(value, series.unit),
                      None if value is None else value < bound)  # fmt: skip

    return [
        target("logs -f: a line shown within 20 ms (median) of the rank writing it", this.median, _LATENCY_BOUND),
        target("logs -f idle: below 1 % of one core", this.idle, _IDLE_BOUND),
        target(f"ma-entrypoint --dry-run of a {SERVERS * DEVICES}-rank table < 50 ms over a bare interpreter",
               this.over, _DRY_BOUND),
    ]
