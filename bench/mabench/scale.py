"""Rank-table scale: read, parse and plan a 2,048-server x 16-device v1.0 table (32,768 ranks).

In-process, with the shim's own functions: its file reader and JSON decoding (``read+json``: regular-file checks,
UTF-8, decoding with bounded integers, where ``server_list`` is decoded part by part and each part checked in
columns as it goes: ``rank_table._parts``), ``rank_table.parse_rank_table`` (the rest of the checks),
``rank_table.select_server`` (this host is the last server, found by ``MA_CURRENT_HOST_IP``) and
``launchers.planning.plan_launch`` (after ``cluster_env.parse_cluster_env``). A sample is the sum of the four; the
median of each step is reported too, with two figures outside the sum: freeing the decoded JSON and a plain
``json.loads`` of the same text (what bounds ``read+json``). As in ``read_rank_table``, the cyclic GC is paused once
over reading, parsing and freeing. One warm-up run is not counted. As a cross-check, the whole
``ma-entrypoint --dry-run`` process on the same table is timed as well (interpreter start-up included), and its
peak resident memory (``ru_maxrss`` from ``wait4``, taken through a small probe process so that this benchmark's
own size does not leak into the figure) is reported: the shim's footprint for a 32,768-rank table.

As a container runs it: this tree is built as a wheel once per run and installed alone into a throwaway venv
(:mod:`.wheelvenv`: no editable ``.pth`` finder at start-up); that venv's ``ma-entrypoint --dry-run`` and its
``python -c pass`` are timed in rotated rounds beside the editable ``python -m malaunch.entrypoint --dry-run`` and
beside the same wheel behind a stand-in for the entry-point wrapper pip writes before 25.0 (:data:`_PIP_WRAPPER`).
The target judges the wheel's whole process against 60 ms (issue 41: plain code) and states its excess over that
venv's floor (the difference within each round), in wall time and in CPU time (user + sys, from ``wait4``: what a
loaded machine inflates least). With ``--baseline REF`` commit REF's tree is built and installed the same way and
its ``ma-entrypoint --dry-run`` runs in the same rounds. The plan every install prints must be the same, byte for
byte.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .baseline import baseline_tree, prepare_farms
from .budgets import scaled_target
from .commands import v10_rank_table
from .procs import PYTHON, WORKERS, BenchError, bench_env, new_mark, scratch_dir, tail
from .results import CaseResult, Series, Target, fmt_value, say
from .wheelvenv import WheelVenv, wheel_venv

__all__ = ["DEVICES", "SERVERS", "run_scale"]

SERVERS = 2048
DEVICES = 16
STEPS = ("read+json", "parse", "select", "plan")
_WHOLE_BOUND = 0.060  # issue 41: --dry-run of a 32,768-rank table as a whole process < 60 ms (plain code)
_ROUNDS_PER_REP = 3  # the processes are short and the machine shared: more rounds steady the medians
#: Timed in each pass but not part of the sample: freeing the decoded JSON (the shim does it in read_rank_table,
#: uncounted here as before), a plain ``json.loads`` of the same text (the floor that bounds ``read+json``), and the
#: CPU time (``thread_time``) of the four steps, which a busy machine inflates less than the wall-clock sample.
EXTRAS = ("free", "json.loads alone", "CPU time of the four")


def _one_pass(path: Path, env: Dict[str, str]) -> Dict[str, float]:
    from malaunch.entrypoint.contract.cluster_env import parse_cluster_env
    from malaunch.entrypoint.launchers.planning import plan_launch
    from malaunch.entrypoint.plan.inputs import LaunchInputs
    from malaunch.entrypoint.plan.rank_table import _decode, _read_bytes, parse_rank_table, select_server
    from malaunch.entrypoint.plan.rank_table._parse import no_gc

    took: Dict[str, float] = {}
    with no_gc():  # as read_rank_table: one pause of the cyclic GC over decoding, parsing and freeing
        c0, t0 = time.thread_time(), time.perf_counter()
        data = _decode(_read_bytes(str(path)), str(path))  # the shim's own reader: checks, UTF-8, bounded JSON
        t1 = time.perf_counter()
        table = parse_rank_table(data, str(path))
        t2, c2 = time.perf_counter(), time.thread_time()
        del data
        freed = time.perf_counter()
    c_select, t_select = time.thread_time(), time.perf_counter()
    index = select_server(
        table,
        host_ip=env["MA_CURRENT_HOST_IP"],
        instance_name=None,
        node_rank=int(env["VC_TASK_INDEX"]),
        num_hosts=SERVERS,
    )
    t3 = time.perf_counter()
    cluster = parse_cluster_env(env)
    inputs = LaunchInputs(
        boot_file=str(WORKERS / "start_worker.py"),
        boot_args=(),
        interpreter=PYTHON,
        cwd=str(path.parent),
        hostname="bench-host",
        path_env=env.get("PATH", ""),
        rank_table=table,
        rank_table_path=str(path),
        server_index=index,
    )
    plan = plan_launch(cluster, inputs)
    t4, c4 = time.perf_counter(), time.thread_time()
    if index != SERVERS - 1 or len(plan.processes) != DEVICES:
        raise BenchError(
            f"rank-table scale: picked server {index} with {len(plan.processes)} processes; "
            f"expected server {SERVERS - 1} with {DEVICES}"
        )
    took.update({"read+json": t1 - t0, "parse": t2 - t1, "select": t3 - t_select, "plan": t4 - t3})
    took["free"] = freed - t2
    took["CPU time of the four"] = (c2 - c0) + (c4 - c_select)
    text = path.read_text()
    with no_gc():
        t5 = time.perf_counter()
        decoded = json.loads(text)
        took["json.loads alone"] = time.perf_counter() - t5
        del decoded
    return took


def _timed(argv: List[str], env: Dict[str, str], cwd: Path) -> Tuple[float, float]:
    """Wall seconds of one run of ``argv`` (stdout discarded), start to reaped, and its CPU seconds (user + sys)."""
    with open(os.devnull, "wb") as null, open(cwd / "timed-stderr.txt", "wb") as err:
        began = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=str(cwd), stdout=null, stderr=err)
        _pid, status, usage = os.wait4(proc.pid, 0)  # one blocking wait: the exit time is exact
        took = time.perf_counter() - began
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise BenchError(f"{argv[0]} {' '.join(argv[1:3])} exited with {code}: "
                         f"{(cwd / 'timed-stderr.txt').read_text(errors='replace')[-300:]}")  # fmt: skip
    return took, usage.ru_utime + usage.ru_stime


def _printed_plan(argv: List[str], env: Dict[str, str], cwd: Path) -> str:
    done = subprocess.run(argv, env=env, cwd=str(cwd), capture_output=True, timeout=120, check=False)
    if done.returncode != 0:
        raise BenchError(f"{argv[0]} --dry-run exited with {done.returncode}: "
                         f"{done.stderr.decode(errors='replace')[-300:]}")  # fmt: skip
    return done.stdout.decode()


class _Installs:
    """The whole-process figures of the editable install and of this tree's wheel in a fresh venv."""

    def __init__(self, size: str, baseline: Optional[str] = None) -> None:
        self.editable = Series("scale/dryrun", "rank-table scale", "ma-entrypoint --dry-run (whole process)", size,
                               "s")  # fmt: skip
        self.wheel = Series("scale/dryrun-wheel", "rank-table scale",
                            "ma-entrypoint --dry-run, wheel install (whole process)", size, "s")  # fmt: skip
        self.floor = Series("scale/wheel-floor", "rank-table scale", "python -c pass, wheel install's venv", size,
                            "s")  # fmt: skip
        self.project_floor = Series("scale/project-floor", "rank-table scale",
                                    "python -c pass, the project's venv (the budget's scale)", size, "s")  # fmt: skip
        self.over = Series("scale/dryrun-wheel-over-floor", "rank-table scale",
                           "ma-entrypoint --dry-run, wheel install, over its python -c pass", size, "s")  # fmt: skip
        self.wrapped = Series("scale/dryrun-wheel-wrapped", "rank-table scale",
                              "the same, through an entry-point wrapper as pip < 25.0 writes it", size,
                              "s")  # fmt: skip
        self.cpu_over = Series("scale/dryrun-wheel-cpu-over-floor", "rank-table scale",
                               "the same in CPU time (user+sys) over its python -c pass", size, "s")  # fmt: skip
        self.baseline = baseline
        self.base = Series("scale/dryrun-wheel-baseline", "rank-table scale",
                           f"ma-entrypoint --dry-run, commit {baseline}'s wheel (whole process)", size,
                           "s")  # fmt: skip
        self.base_cpu_over = Series("scale/dryrun-wheel-baseline-cpu-over-floor", "rank-table scale",
                                    f"commit {baseline}'s, in CPU time (user+sys) over its python -c pass", size,
                                    "s")  # fmt: skip
        self.cpus: Dict[str, List[float]] = {}
        self.venv: Optional[WheelVenv] = None
        self.base_venv: Optional[WheelVenv] = None
        self.same_plan = False  # both installs printed the same plan (checked before the rounds)

    def series(self) -> List[Series]:
        found = [self.editable, self.wheel, self.floor, self.project_floor, self.over, self.cpu_over, self.wrapped]
        return found + ([self.base, self.base_cpu_over] if self.baseline is not None else [])

    def measure(self, rounds: int, env: Dict[str, str], scratch: Path) -> None:
        """``rounds`` rounds, each running every subject once, the first of them rotating round by round."""
        boot = str(WORKERS / "start_worker.py")
        try:
            self.venv = wheel_venv(scratch / "wheel-install")
        except BenchError as exc:
            self.wheel.error = self.floor.error = self.over.error = self.wrapped.error = str(exc).splitlines()[0]
        # The ranks' interpreter is pinned so that the two installs' plans can be compared byte for byte.
        run_env = bench_env(new_mark(), {**env, "MA_SCRIPT_INTERPRETER": PYTHON})
        subjects: List[Tuple[Series, List[str]]] = [
            (self.editable, [PYTHON, "-m", "malaunch.entrypoint", "--dry-run", boot])]
        if self.venv is not None:
            subjects += [(self.wheel, [self.venv.entrypoint, "--dry-run", boot]),
                         (self.floor, [self.venv.python, "-c", "pass"]),
                         (self.project_floor, [PYTHON, "-c", "pass"]),
                         (self.wrapped, [_write_wrapper(self.venv), "--dry-run", boot])]  # fmt: skip
            if self.baseline is not None:
                try:
                    self.base_venv = wheel_venv(scratch / "baseline-install", baseline_tree(self.baseline))
                    subjects.append((self.base, [self.base_venv.entrypoint, "--dry-run", boot]))
                except BenchError as exc:
                    self.base.error = self.base_cpu_over.error = str(exc).splitlines()[0]
            editable_plan = _printed_plan(subjects[0][1], run_env, scratch)
            for series, argv in subjects[1:]:
                if argv[1:] != ["-c", "pass"] and _printed_plan(argv, run_env, scratch) != editable_plan:
                    raise BenchError(f"{series.subject} printed another plan than the editable install's")
            self.same_plan = True
        for index in range(rounds):
            took: Dict[str, float] = {}
            spent: Dict[str, float] = {}
            for offset in range(len(subjects)):
                series, argv = subjects[(index + offset) % len(subjects)]
                took[series.key], spent[series.key] = _timed(argv, run_env, scratch)
                series.samples.append(took[series.key])
                self.cpus.setdefault(series.key, []).append(spent[series.key])
            if self.venv is not None:
                self.over.samples.append(took[self.wheel.key] - took[self.floor.key])
                self.cpu_over.samples.append(spent[self.wheel.key] - spent[self.floor.key])
            if self.base.key in spent:
                self.base_cpu_over.samples.append(spent[self.base.key] - spent[self.floor.key])
            say(f"  --dry-run round {index + 1}/{rounds}: "
                + ", ".join(f"{key.split('/')[1]} {fmt_value(value, 's')}" for key, value in took.items()))

    def target(self) -> Target:
        claim = (f"ma-entrypoint --dry-run of a {SERVERS * DEVICES}-rank table, wheel install, whole process "
                 f"< {_WHOLE_BOUND * 1000:.0f} ms")
        med = self.wheel.median
        if med is None or self.over.median is None or self.floor.median is None:
            return Target(claim, "not measured", None)
        measured = (f"{fmt_value(med, 's')}: {fmt_value(self.over.median, 's')} over that venv's python -c pass "
                    f"({fmt_value(self.floor.median, 's')})")  # fmt: skip
        if self.cpu_over.median is not None:
            measured += f"; CPU {fmt_value(self.cpu_over.median, 's')} over it"
        wrapped = self.wrapped.median
        if wrapped is not None:
            measured += f"; behind pip < 25.0's entry-point wrapper {fmt_value(wrapped, 's')} ({wrapped / med:.3g} x)"
        return Target(claim, measured, med < _WHOLE_BOUND)

    def scaled_target(self) -> Optional[Target]:
        """The same bound scaled by the project venv's ``python -c pass`` against the issue's (:mod:`.budgets`)."""
        if self.wheel.median is None or self.project_floor.median is None:
            return None
        subject = f"ma-entrypoint --dry-run of a {SERVERS * DEVICES}-rank table, wheel install"
        return scaled_target(subject, self.wheel.median, _WHOLE_BOUND, self.project_floor.median, "whole process")

    def baseline_target(self) -> Optional[Target]:
        """This tree's dry run against the baseline commit's, CPU over the same floor (informational)."""
        if self.baseline is None:
            return None
        claim = f"ma-entrypoint --dry-run, {SERVERS * DEVICES} ranks: CPU over the floor, this tree against commit " \
                f"{self.baseline}'s"
        this, base = self.cpu_over.median, self.base_cpu_over.median
        if this is None or base is None or self.base.median is None or self.wheel.median is None:
            return Target(claim, "not measured", None)
        return Target(claim, f"+{fmt_value(this, 's')} vs +{fmt_value(base, 's')}: {(this - base) * 1000:+.1f} ms "
                             f"(whole process {fmt_value(self.wheel.median, 's')} vs "
                             f"{fmt_value(self.base.median, 's')})", None)


#: A stand-in for what pip before 25.0 writes into bin/ for a ``[project.scripts]`` entry point: it imports ``re``
#: and strips a suffix from argv[0] with a pattern before calling the function (pip 25.0 dropped the ``re``).
#: ma-entrypoint was such an entry point until it became a plain script; an image with an older pip ran this.
_PIP_WRAPPER = """#!{python}
import re
import sys

from malaunch.entrypoint.main import console_main

sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
sys.exit(console_main())
"""


def _write_wrapper(venv: WheelVenv) -> str:
    """The wheel install's modules behind :data:`_PIP_WRAPPER`, beside its ``ma-entrypoint``; its path."""
    path = Path(venv.entrypoint).with_name("ma-entrypoint-pip-wrapper")
    path.write_text(_PIP_WRAPPER.format(python=venv.python))
    path.chmod(0o755)
    return str(path)


#: Started as ``python -I -S -c _RSS_PROBE OUT ARGV...``: forks, execs ARGV, writes "exit-code max-rss-KiB" to OUT.
#: Linux carries a parent's resident size into its child's ``ru_maxrss`` at fork (and through ``vfork``/exec), so a
#: child started from this benchmark (tens of MB after parsing tables) would report at least that; this small
#: interpreter in between puts the floor at its own ~10 MB, below any Python that runs the shim.
_RSS_PROBE = (
    "import os, sys\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.execv(sys.argv[2], sys.argv[2:])\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "with open(sys.argv[1], 'w') as out:\n"
    "    out.write(f'{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}')\n"
)


def _peak_rss(path: Path, env: Dict[str, str], scratch: Path) -> float:
    """Peak RSS in MB of one ``ma-entrypoint --dry-run`` process on the table (``wait4``'s rusage, via the probe)."""
    argv = [PYTHON, "-m", "malaunch.entrypoint", "--dry-run", str(WORKERS / "start_worker.py")]
    out = scratch / "rss.txt"
    with open(scratch / "rss-stderr.txt", "wb") as err:
        probe = subprocess.run([PYTHON, "-I", "-S", "-c", _RSS_PROBE, str(out), *argv], env=bench_env(new_mark(), env),
                               cwd=str(scratch), stdout=subprocess.DEVNULL, stderr=err, timeout=120, check=False)
    if probe.returncode != 0 or not out.exists():
        raise BenchError(f"peak RSS probe exited with {probe.returncode}:\n{tail(scratch / 'rss-stderr.txt')}")
    code, kib = out.read_text().split()
    if code != "0":
        raise BenchError(f"ma-entrypoint --dry-run (peak RSS) exited with {code}:\n{tail(scratch / 'rss-stderr.txt')}")
    return int(kib) / 1024.0  # Linux reports KiB


def run_scale(reps: int, baseline: Optional[str] = None) -> CaseResult:
    """Time the in-process parse+plan ``reps`` times (after a warm-up) and the --dry-run process ``reps`` times (with
    ``baseline``, a commit, that commit's wheel beside this tree's)."""
    scratch = scratch_dir("scale")
    total = Series(
        "scale/inprocess",
        "rank-table scale",
        "parse + select + plan, in-process",
        f"{SERVERS} x {DEVICES} = {SERVERS * DEVICES} ranks",
        "s",
    )
    if baseline is not None:
        baseline = prepare_farms(baseline)
    installs = _Installs(total.size, baseline)
    dry = installs.editable
    rss = Series("scale/dryrun-rss", "rank-table scale", "ma-entrypoint --dry-run peak RSS", total.size, "MB")
    try:
        path = scratch / "jobstart_hccl.json"
        table = v10_rank_table(SERVERS, DEVICES)
        path.write_text(json.dumps(table))
        last = table["server_list"][-1]  # type: ignore[index]
        env = {
            "MA_RUN_METHOD": "ranktable",
            "MA_NUM_HOSTS": str(SERVERS),
            "VC_TASK_INDEX": str(SERVERS - 1),
            "MA_VJ_NAME": "bench",
            "MA_TASK_NAME": "worker",
            "RANK_TABLE_FILE": str(path),
            "MA_CURRENT_HOST_IP": str(last["server_id"]),
            "MALAUNCH_LOG_DIR": str(scratch / "logs"),
            "PATH": os.environ.get("PATH", ""),
        }
        say(f"  rank table: {path.stat().st_size / 1e6:.1f} MB, {SERVERS * DEVICES} ranks")
        steps: Dict[str, List[float]] = {step: [] for step in STEPS + EXTRAS}
        try:
            _one_pass(path, env)  # warm-up: imports, page cache
            for rep in range(reps):
                took = _one_pass(path, env)
                for step, value in took.items():
                    steps[step].append(value)
                total.samples.append(sum(took[step] for step in STEPS))
                say(f"  rank-table scale rep {rep + 1}/{reps}: {fmt_value(total.samples[-1], 's')}")
        except (BenchError, ImportError) as exc:
            total.error = str(exc).splitlines()[0]
        if total.samples:
            total.note = "medians: " + ", ".join(
                f"{step} {fmt_value(statistics.median(values), 's')}" for step, values in steps.items()
            )
        try:
            installs.measure(reps * _ROUNDS_PER_REP, env, scratch)
        except BenchError as exc:
            dry.error = str(exc).splitlines()[0]
        dry.note = "editable install (python -m): start-up with its .pth finder, imports, the table, the plan"
        try:
            for _rep in range(reps):
                rss.samples.append(round(_peak_rss(path, env, scratch), 1))
            say(f"  --dry-run peak RSS: {rss.median} MB")
        except (BenchError, OSError) as exc:
            rss.error = str(exc).splitlines()[0]
        rss.note = "peak resident memory of the whole shim process (ru_maxrss), table file included in the reading"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    claim = f"rank-table scale: {SERVERS * DEVICES} ranks read, parsed and planned in < 50 ms"
    med = total.median
    target = Target(claim, "not measured" if med is None else fmt_value(med, "s"), None if med is None else med < 0.05)
    if med is not None and steps["json.loads alone"]:
        alone = fmt_value(statistics.median(steps["json.loads alone"]), "s")
        target.comment = (f"json.loads alone of the same text: {alone} (one dict per device, three strings each, "
                          "all alive at once); the shim decodes server_list part by part and checks each part in "
                          "column-wide C passes, so no part's objects outlive it")
    targets = [target, installs.target()]
    for extra in (installs.scaled_target(), installs.baseline_target()):
        if extra is not None:
            targets.append(extra)
    result = CaseResult("ranktable-scale", [total, *installs.series(), rss], targets)
    result.notes.append(
        "rank-table scale = the shim's read + decoding (server_list part by part) + parse_rank_table + "
        "select_server (last server, by "
        "MA_CURRENT_HOST_IP) + parse_cluster_env/plan_launch, in-process, median after one warm-up"
        + (f"; its steps' {total.note}." if total.note else ".")
    )
    wheel = installs.venv.wheel if installs.venv is not None else "not built"
    result.notes.append(
        f"wheel install = this tree built as a wheel ({wheel}) and installed with --no-deps into a fresh venv, as an "
        "image installs it; its ma-entrypoint --dry-run (a plain script) and its python -c pass run in rotated "
        "rounds with the editable install's python -m malaunch.entrypoint --dry-run and with the wheel's modules "
        "behind a stand-in for the entry-point wrapper pip writes before 25.0 (it imports re and compiles a pattern "
        "first: what ma-entrypoint cost as an entry point installed by such a pip); over its python -c pass = the "
        "difference within each round." + (" Both installs printed the same plan." if installs.same_plan else "")
    )
    return result
