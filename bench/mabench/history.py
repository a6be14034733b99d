"""``history``: ``ma-submit list`` and ``status`` of a local home as it grows from 1 to 10,000 ended jobs (issue 28).

One ended job is run for real; the home then grows by copies of its folder (hard links: cheap, and what the
issue's measurement did), to 100, 1,000 and 10,000 jobs. At each size, in one run and alternating, each subject
is a whole process started and waited for:

- a bare interpreter (``python -c pass``), the floor of any command;
- ``ma-submit list`` and ``ma-submit status ID`` of this tree;
- the same two of main's code (``--baseline``, default ``main``), mounted from a link farm with the same
  interpreter (:mod:`.baseline`), to show that no case got slower.

Before timing, each command runs once on the home untimed (this tree's ``list`` builds its history index then,
as the first ``list`` after an upgrade does; the files are in the page cache for both). ``--only history``
rewrites this case's section of ``docs/performance.md`` and ``docs/performance-history.svg``.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .baseline import sdk_farms
from .procs import PYTHON, REPO, BenchError, bench_env, new_mark, scratch_dir, timed_process
from .results import CaseResult, Series, Target, fmt_ratio, fmt_value, section_head
from .svg import render_svg

__all__ = ["SIZES", "history_section", "run_history"]

SIZES = (1, 100, 1_000, 10_000)
_CLI = "import sys; from malaunch.sdk.cli import main; sys.exit(main())"
_BOOT = "print('done', flush=True)\n"
_SVG = "performance-history.svg"
_IN_PROCESS = (
    "import json, sys, time\n"
    "from malaunch.sdk.backends.local.backend import LocalBackend\n"
    "from malaunch.sdk.backends.listing import ListQuery\n"
    "backend = LocalBackend()\n"
    "backend.list_page(ListQuery(), now=time.time())\n"
    "took = []\n"
    "for _ in range(int(sys.argv[1])):\n"
    "    start = time.perf_counter()\n"
    "    backend.list_page(ListQuery(), now=time.time())\n"
    "    took.append(time.perf_counter() - start)\n"
    "print(json.dumps(took))\n"
)
_IN_PROCESS_SUBJECT = "list's own work in-process (list_page), this tree"


def _job(scratch: Path, env: Dict[str, str]) -> str:
    code = scratch / "code"
    code.mkdir()
    (code / "boot.py").write_text(_BOOT)
    (code / "job.yaml").write_text(json.dumps({"name": "hist", "code_dir": ".", "boot_file": "boot.py"}))
    done = subprocess.run([os.path.join(os.path.dirname(PYTHON), "ma-submit"), str(code / "job.yaml")], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    jobs = sorted(os.listdir(Path(env["MALAUNCH_HOME"]) / "jobs"))
    if done.returncode != 0 or len(jobs) != 1:
        raise BenchError(f"history: the one real job failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    return jobs[0]


def _grow(home: Path, job_id: str, have: int, want: int) -> None:
    source = home / "jobs" / job_id
    stem = job_id.rsplit("-", 1)[0]
    for index in range(have, want):
        shutil.copytree(source, home / "jobs" / f"{stem}-c{index:05d}", copy_function=os.link)


def _time(argv: List[str], env: Dict[str, str]) -> float:
    took, _cpu, code, err = timed_process(argv, env, timeout=600)
    if code != 0:
        raise BenchError(f"history: {' '.join(argv[-2:])} exited with {code}: {err[-300:]!r}")
    return took


def run_history(reps: int, baseline: str = "main", sizes: Sequence[int] = SIZES) -> CaseResult:
    """Measure every subject at every size, ``reps`` times each, alternating."""
    short, this_farm, main_farm = sdk_farms(baseline)
    scratch = scratch_dir("history")
    mark = new_mark()
    home = scratch / "home"
    env = bench_env(mark, {"MALAUNCH_HOME": str(home)})
    subjects: Dict[str, Tuple[List[str], Dict[str, str]]] = {}
    series: List[Series] = []
    try:
        job_id = _job(scratch, env)
        with_this, with_main = dict(env, PYTHONPATH=str(this_farm)), dict(env, PYTHONPATH=str(main_farm))
        subjects = {
            "bare interpreter (python -c pass)": ([PYTHON, "-c", "pass"], env),
            "list, this tree": ([PYTHON, "-c", _CLI, "list"], with_this),
            f"list, main ({short})": ([PYTHON, "-c", _CLI, "list"], with_main),
            "status ID, this tree": ([PYTHON, "-c", _CLI, "status", job_id], with_this),
            f"status ID, main ({short})": ([PYTHON, "-c", _CLI, "status", job_id], with_main),
        }
        have = 1
        for size in sizes:
            _grow(home, job_id, have, size)
            have = max(have, size)
            row = {name: Series(f"history/{size}/{name}", "history", name, f"{size} jobs", "s")
                   for name in subjects}  # fmt: skip
            for argv, sub_env in subjects.values():
                _time(argv, sub_env)  # untimed: builds this tree's index, warms the page cache
            for _ in range(reps):
                for name, (argv, sub_env) in subjects.items():
                    row[name].samples.append(_time(argv, sub_env))
            series += row.values()
            series.append(_in_process(size, with_this, 5 * reps))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return CaseResult("history", series, _targets(series, sizes, short), _notes(reps, short))


def _in_process(size: int, env: Dict[str, str], reps: int) -> Series:
    """The time ``list`` spends on the history itself, without the interpreter's start: ``reps`` calls in one
    process."""
    item = Series(f"history/{size}/in-process", "history", _IN_PROCESS_SUBJECT, f"{size} jobs", "s")
    done = subprocess.run([PYTHON, "-c", _IN_PROCESS, str(reps)], env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        item.error = f"exit {done.returncode}: {done.stderr.strip()[-200:]}"
    else:
        item.samples = [float(x) for x in json.loads(done.stdout)]
    return item


def _fastest(series: Sequence[Series], subject: str, size: int) -> Optional[float]:
    found = [min(s.samples) for s in series if s.subject == subject and s.size == f"{size} jobs" and s.samples]
    return found[0] if found else None


def _median(series: Sequence[Series], subject: str, size: int) -> Optional[float]:
    found = [s.median for s in series if s.subject == subject and s.size == f"{size} jobs"]
    return found[0] if found else None


def _targets(series: Sequence[Series], sizes: Sequence[int], short: str) -> List[Target]:
    first, last = sizes[0], sizes[-1]
    out: List[Target] = []
    for verb, bound in (("list", 0.050), ("status ID", 0.020)):
        one, many = _fastest(series, f"{verb}, this tree", first), _fastest(series, f"{verb}, this tree", last)
        ok = None if one is None or many is None else many - one <= bound
        measured = "-" if ok is None else f"{fmt_value(many, 's')} vs {fmt_value(one, 's')} (fastest runs)"
        out.append(Target(f"{verb}: {last:,} ended jobs within {bound * 1000:.0f} ms of the {first}-job home",
                          measured, ok))  # fmt: skip
    one, many = _median(series, _IN_PROCESS_SUBJECT, first), _median(series, _IN_PROCESS_SUBJECT, last)
    if one is not None and many is not None:
        out.append(Target(f"list's own work: {last:,} jobs within 50 ms of {first} (in-process medians)",
                          f"{fmt_value(many, 's')} vs {fmt_value(one, 's')}", many - one <= 0.050))  # fmt: skip
    for verb in ("list", "status ID"):
        ratios = []
        for size in sizes:
            mine = _fastest(series, f"{verb}, this tree", size)
            theirs = _fastest(series, f"{verb}, main ({short})", size)
            if mine is not None and theirs:
                ratios.append(mine / theirs)
        ok = None if len(ratios) != len(sizes) else max(ratios) <= 1.10
        worst = fmt_ratio(max(ratios)) if ratios else "-"
        out.append(Target(f"{verb}: no size slower than main's code (this / main <= 1.1 at every size, fastest runs)",
                          worst, ok, "the worst ratio over the sizes"))  # fmt: skip
    return out


def _notes(reps: int, short: str) -> List[str]:
    return [
        f"history: one real ended job, then copies of its folder (hard links) up to each size; {reps} runs per "
        "subject and size, alternating; each run is a whole process (start to exit), wall time",
        f"history: this tree and main ({short}) run from link farms on PYTHONPATH with the same interpreter; one "
        "untimed run of each command per size first (this tree's list builds its history index in it)",
        f"history: the targets compare the fastest of the {reps} runs of each whole command (the machine is shared: "
        "the medians carry other processes' load); the in-process row times list_page alone, "
        f"{5 * reps} calls in one process after one untimed call",
    ]


def history_section(result: CaseResult, command: str, started: datetime.datetime, minutes: float,
                    facts: Dict[str, str]) -> str:  # fmt: skip
    """This case's section of docs/performance.md (its plot is written beside it, ``docs/performance-history.svg``)."""
    sizes = sorted({int(s.size.split()[0]) for s in result.series})
    subjects = list(dict.fromkeys(s.subject for s in result.series))
    out = section_head("History: list and status from 1 to 10,000 jobs", result, command, started, minutes, facts,
                       ". Medians of whole processes (start to exit).")  # fmt: skip
    out += ["Median (fastest) of each subject:", ""]
    out += ["| Subject | " + " | ".join(f"{n:,} jobs" for n in sizes) + " | Runs |", "|" + "---|" * (len(sizes) + 2)]
    for subject in subjects:
        cells = [_cell(result.series, subject, n) for n in sizes]
        runs = max((len(s.samples) for s in result.series if s.subject == subject), default=0)
        out.append(f"| {subject} | " + " | ".join(cells) + f" | {runs} |")
    out += ["", "| Target | Measured | Verdict |", "|---|---|---|"]
    out += [f"| {t.claim} | {t.measured} | **{t.verdict}** |" for t in result.targets]
    svg = _plot(result, f"{command} - {started:%Y-%m-%d} - nproc {facts.get('nproc')}")
    if svg:
        (REPO / "docs" / _SVG).write_text(svg)
        out += ["", f"![list and status by the number of jobs]({_SVG})"]
    out += ["", "How it was measured:", "", *[f"- {note}" for note in result.notes], ""]
    out += [
        "What the figures mean: main's `list` opens every job's folder, so it grows with the jobs; this tree's "
        "answers from the history index (`<home>/job-history.json`, [cli.md](cli.md#list)) and reads only the jobs "
        "that are not ended, so what is left of its growth is reading that one file and one `scandir`. `status ID` "
        "reads one job either way. On a shared machine (load averages above) a whole process varies by more than "
        "the differences between sizes: the in-process row is the one that isolates the history's own growth."
    ]
    return "\n".join(out)


def _cell(series: Sequence[Series], subject: str, size: int) -> str:
    return f"{fmt_value(_median(series, subject, size), 's')} ({fmt_value(_fastest(series, subject, size), 's')})"


def _plot(result: CaseResult, caption: str) -> Optional[str]:
    def labelled(verb: str) -> List[Series]:
        return [Series(s.key, s.case, f"{s.subject}, {s.size}", s.size, s.unit, s.samples, error=s.error)
                for s in result.series if s.subject.startswith(verb) or s.subject.startswith("bare")]  # fmt: skip

    titles = ("ma-submit list by jobs in the home (median; line: min-max)", "ma-submit status ID by jobs in the home")
    return render_svg(labelled("list"), labelled("status"), caption, titles)
