"""Turn case results into the console table, ``docs/performance.md`` and its plot ``docs/performance.svg``.

The document is regenerated whole by ``python bench/run.py``; it records the command, the machine (nproc, CPU,
Python, torch and mindspore versions), the date, the targets with pass/short and the measured ratios, every
series (median, range, runs, ratios against the bare launchers), how each figure was measured, and where the
shim falls short.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from importlib import metadata
from typing import Dict, List, Optional, Sequence

from .procs import REPO
from .results import CaseResult, Series, Target, fmt_ratio, fmt_value, section_head
from .svg import render_svg

__all__ = ["OWN_SECTION", "console_table", "machine_facts", "markdown", "ratio_text", "section", "write_docs",
           "write_section"]

#: Which targets the bench holds the shim to, and the two it no longer does; shown above the targets table.
RETIRED = (
    "The bench's targets are those this page argues for: start-up within 25 ms of the floor, and log throughput at "
    "least 0.45 x a direct write. Two were retired as beyond this machine's physics: start-up <= 0.05 x torchrun "
    "(the floor alone, one interpreter Popen-ing N=4, takes more than 0.05 x of torchrun's start-up here) and log "
    "throughput >= 80 % of a direct write (`tee`, the same copies in C, reaches about 0.54 x)."
)

#: Why a target can fall short, by the start of its claim; shown under "Where it falls short".
SHORT_CAUSES: Dict[str, str] = {
    "teardown: shim (torchrun)": (
        "Under MA_RUN_METHOD=torchrun the shim sees the failed worker die through a pidfd (before torchrun's "
        "0.1 s monitor does), sends SIGTERM to every other worker and SIGKILL to torchrun at once: the workers "
        "write their output into files of their own (--redirects=3) that the shim follows, and the root cause "
        "comes from the watch's exit statuses, so nothing waits for torchrun's summary. What is left is the "
        "kernel ending torchrun after SIGKILL (tens of ms: an interpreter with torch loaded), the workers' own "
        "exit, and the shim's own end (reading the files to the end, the report, the watchdog), as under ranktable."
    ),
    "teardown: shim (msrun)": (
        "Under MA_RUN_METHOD=msrun the shim watches msrun's workers (found by its token) and reads a dead worker's "
        "exit status from its zombie every 50 ms, without waiting for msrun's once-a-second poll and its "
        "'Worker process ... exit with exception' line (the fallback)."
    ),
}


def ratio_text(item: Series, by_key: Dict[str, Series]) -> str:
    """Ratios of ``item``'s median to the bare launchers of the same case and workload."""
    refs: List[tuple[str, str]] = []
    parts = item.key.split("/")
    if parts[0] == "startup":
        refs = [(f"startup/{parts[1]}/torchrun", "torchrun"), (f"startup/{parts[1]}/popen", "floor")]
    elif parts[0] == "teardown":
        refs = [("teardown/torchrun", "torchrun"), ("teardown/msrun", "msrun")]
    elif item.key in ("log/shim", "log/tee"):
        refs = [("log/direct", "direct"), ("log/tee", "tee")]
    elif parts[0] == "obs" and parts[2] != "plain":
        refs = [(f"obs/{parts[1]}/plain", "plain")]
    elif parts[0] == "coord":
        smallest = min((key.split("/")[1] for key in by_key if key.startswith("coord/")), key=int)
        refs = [(f"coord/{smallest}/{parts[2]}", f"N={smallest}")]
    texts = []
    for key, name in refs:
        other = by_key.get(key)
        if other is None or other is item or item.median is None or other.median is None:
            continue
        texts.append(f"{fmt_ratio(item.median / other.median)} {name}")
    return ", ".join(texts)


def _rows(results: Sequence[CaseResult]) -> List[List[str]]:
    by_key = {item.key: item for result in results for item in result.series}
    rows = []
    for result in results:
        if result.error:
            rows.append([result.case, "(case failed)", "", result.error, "", "", "", ""])
        for item in result.series:
            if item.median is None:
                figure, spread = (item.error or "no data"), ""
            else:
                figure = fmt_value(item.median, item.unit)
                spread = f"{fmt_value(min(item.samples), item.unit)} - {fmt_value(max(item.samples), item.unit)}"
            rows.append(
                [
                    item.case,
                    item.subject,
                    item.size,
                    figure,
                    spread,
                    str(len(item.samples)),
                    ratio_text(item, by_key),
                    item.note,
                ]
            )
    return rows


HEADER = ["Case", "Launcher / subject", "Workload", "Median", "Min - max", "Runs", "Ratio", "Notes"]


def console_table(results: Sequence[CaseResult]) -> str:
    """Plain-text table of every series (notes left out) followed by the targets."""
    rows = [row[:7] for row in _rows(results)]
    head = HEADER[:7]
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(head, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in rows]
    targets = [t for result in results for t in result.targets]
    if targets:
        lines += ["", "Targets:"]
        lines += [f"  [{t.verdict:5}] {t.claim}: {t.measured}" for t in targets]
    return "\n".join(lines)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_revision() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    except OSError:
        return "unknown"
    return (head or "unknown") + (" + uncommitted changes" if dirty else "")


def machine_facts() -> Dict[str, str]:
    """nproc, CPU, memory, kernel, Python, torch, mindspore, the repository revision and the load average."""
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        memory = f"{mem:.0f} GiB"
    except (ValueError, OSError):
        memory = "unknown"
    return {
        "nproc": str(len(os.sched_getaffinity(0))),
        "CPU": _cpu_model(),
        "memory": memory,
        "kernel": f"{platform.system()} {platform.release()}",
        "Python": platform.python_version(),
        "torch": _version("torch"),
        "mindspore": _version("mindspore"),
        "malaunch revision": _git_revision(),
        "load average (1/5/15 min, at the end of the run)": ", ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(
    results: Sequence[CaseResult],
    command: str,
    started: datetime.datetime,
    minutes: float,
    facts: Dict[str, str],
    plot: Optional[str],
) -> str:
    """The whole ``docs/performance.md`` (a case with a section of its own is shown there, not in the tables)."""
    own = [result for result in results if result.case in OWN_SECTION]
    results = [result for result in results if result.case not in OWN_SECTION]
    targets: List[Target] = [t for result in results for t in result.targets]
    out = [
        "# Performance: the shim side by side with torchrun and msrun",
        "",
        f"Generated by `{command}` on {started:%Y-%m-%d %H:%M} UTC ({minutes:.1f} min). Do not edit by hand: "
        "rerun the command (`--no-write` prints the table without touching this file).",
        "",
        "## Machine",
        "",
        *[f"- {key}: {value}" for key, value in facts.items()],
        "",
        "## Targets",
        "",
        RETIRED,
        "",
        "| Target | Measured | Verdict |",
        "|---|---|---|",
        *[f"| {_md_cell(t.claim)} | {_md_cell(t.measured)} | **{t.verdict}** |" for t in targets],
        "",
        "## Results",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
        *["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in _rows(results)],
        "",
    ]
    if plot:
        out += [f"![Start-up and teardown per launcher (log scale)]({plot})", ""]
    out += ["## How it was measured", "", *[f"- {note}" for result in results for note in result.notes]]
    out += [
        "- Each timing is the median of several runs; within a repetition the compared launchers run one after "
        "another in an order rotated per repetition, so drifts hit all of them alike. Every launcher gets a free "
        "port, runs in a session of its own, and everything it started (found by a marker variable in "
        "/proc/*/environ, which also catches msrun's and torchrun's detached workers) is killed before the next run.",
        "- malaunch's bytecode is compiled before the run, as a pip-installed wheel has it (these machines set "
        "PYTHONDONTWRITEBYTECODE=1, and the editable install has none: without it every shim start compiles its "
        "modules from source, about 25 ms).",
        "",
    ]
    short = [t for t in targets if t.ok is False]
    out += ["## Where it falls short", ""]
    if not short:
        out += ["Every target was met in this run." if targets else "No target was evaluated in this run.", ""]
    for target in short:
        cause = target.comment or next(
            (text for prefix, text in SHORT_CAUSES.items() if target.claim.startswith(prefix)), ""
        )
        out.append(f"- **{target.claim}**: measured {target.measured}. {cause}".rstrip())
    if short:
        out.append("")
    for result in own:
        out += [section(result, command, started, minutes, facts), ""]
    return "\n".join(out)


#: Cases whose figures have a section of their own in docs/performance.md, which ``--only CASE`` rewrites in place.
OWN_SECTION = ("coordinator", "verbs", "latency", "history", "ranktable-scale", "hosts", "ui", "recover")
_TITLES = {"coordinator": "The hosts' coordinator at scale", "latency": "Daily-use latency: logs -f and --dry-run",
           "ranktable-scale": "Rank-table scale: a 32,768-rank table read, checked and planned",
           "ui": "ui: the jobs page, a rank's line in an open page, the idle server"}
_BEGIN = "<!-- section {case}: generated by bench/run.py (--only {case} rewrites it alone) -->"
_END = "<!-- end of section {case} -->"

_MEANS: Dict[str, List[str]] = {"ui": [
    "**Jobs page**: the server asks the local backend's `list_page` for the newest 50 (its history index: one "
    "file, only the rows of the page decoded), then reads each row's status for its hosts; what grows with the "
    "jobs is reading the index, so 10,000 ended jobs cost little more than ten. A row's restarts come from its "
    "events, counted in the background and kept once the job has ended: the first load of a fresh server shows "
    "`-` for them and pays for building the index ([ui.md](ui.md)). The *list_page* row is the SDK's index alone, "
    "timed in the bench's own process between the page's loads: what is left of the page's time is the page's "
    "own work (50 statuses, kept once read, and the HTML) and the HTTP round trip. On a machine as loaded as the "
    "load averages above say (2 cores), every figure is several times what a quiet machine gives: the history "
    "section measured the same list_page at 10,000 jobs in about 24 ms on a quiet one.",
    "**A rank's line**: the rank's write, the shim copying it into host 0's console log, the page's script asking "
    "for the bytes after its offset (every 0.4 s while the job runs, at once again while lines come), the server "
    "reading them, and the browser adding the line. The median is about half the poll interval.",
    "**Idle**: with no page open the server only wakes twice a second to check for a shutdown "
    "(`serve_forever`'s poll); the usage samplers run only while a job's page asks.",
], "coordinator": [
    "**CPU share** is what the master host's shim spends serving the job's coordinator while nothing happens but "
    "heartbeats: one line each way per host per interval, each proved by an HMAC and checked. It grows with the "
    "hosts and with the heartbeat rate (the short timeout beats five times as often).",
    "**Memory** is the coordinator's whole process (an interpreter with the shim's modules); what a host adds is "
    "its connection, its channel and a few buffers: the growth from the smallest job to the largest, divided by "
    "the hosts added, is the coordinator's cost per host (O(hosts): the book keeps one entry per host).",
    "**SIGKILLed -> all told**: the kernel closes the dead shim's socket; the coordinator reads the end of it at "
    "once, ends the attempt and writes one `end` line to every other host. The figure is that fan-out plus each "
    "link's thread waking up to read it; it does not depend on the heartbeat timeout.",
    "**SIGSTOPped -> all told**: a frozen host's socket stays open and says nothing; the coordinator loses it "
    "once nothing has come from it for the heartbeat timeout (checked every 50 ms), counted from the last line it "
    "heard. A host's link sends its heartbeat one to two intervals apart (it sends when its read returns, and a "
    "read waits up to one interval), so counted from the freeze the figure falls between the timeout less two "
    "intervals and the timeout, plus the same fan-out. At the default timeout (20 s) it is 18 s longer.",
    "The three processes share this machine's cores (nproc above) with whatever else runs on it, the members' "
    "threads with the coordinator too: the times are upper bounds of what a coordinator with a core of its own "
    "would show.",
], "latency": [
    "**logs -f** is the lag a user sees: the rank's write, the shim copying its pipe into the rank log and the "
    "console file, the follower noticing the console grew and reading it, and its stdout. The follower sleeps "
    "until the kernel says a console or the job's state file changed (inotify); where it cannot use inotify it "
    "reads the files every 0.1 s, as every follower did before.",
    "**idle CPU**: while nothing is written the follower only wakes to ask the job's state (twice a second).",
    "**--dry-run over the bare interpreter** is the dry-run process less `python -c pass` of the same repetition: "
    "the shim's imports, reading and checking the whole table, and printing this host's plan.",
    "**Where the dry-run's time goes** (measured in the process, on this machine): decoding the 2.4 MB table, "
    "about 13.5 ms, nearly all of it json's C scanner making one dict and three strings per device; checking each "
    "part's devices in columns as it is decoded, about 6 ms (server_list is decoded about 32 KiB at a time and "
    "each part dropped once checked, so new memory goes only to what the table keeps); checking the columns as a "
    "whole and building the servers, about 3 ms; the shim's imports, about 7 ms; this host's plan and its "
    "printing, about 2 ms. A fresh process also pays for each page of memory it touches first, about 3 us a page "
    "on this machine (a virtual machine): a dry-run touches about 1,600 pages more than its imports do (the file's "
    "bytes, the device IPs the table keeps), some 5 ms. Where every server lists the same device ids, the id "
    "column holds the first server's strings only. The shim's start-up runs with the cyclic garbage collector off "
    "and freezes what it made once planned (gc.freeze): two collections used to walk it, about 0.7 and 0.9 ms.",
], "ranktable-scale": [
    "**In-process** is the shim's own work on a warm interpreter: reading the file, decoding its server_list part "
    "by part while checking each part's servers and devices in columns, checking the whole, picking this host's "
    "server and planning its ranks. *json.loads alone* decodes the same text whole, as the shim did before. A "
    "fresh process pays more for the same steps: each new page of memory is a fault, and decoding by parts keeps "
    "the new pages to the columns the table keeps (the peak RSS row).",
    "**Wheel install, whole process** is what a container's ENTRYPOINT pays from exec to exit, interpreter "
    "start-up included; the editable install adds its .pth finder (and python -m) to every start. The wheel's "
    "ma-entrypoint is a plain script (entrypoint/ma-entrypoint), so what it costs does not depend on the pip that "
    "installed it: before 25.0, pip's wrapper for an entry point imported re and compiled a pattern before calling "
    "the shim (the *pip < 25.0* row: the same wheel behind a stand-in for that wrapper).",
]}


def section(result: CaseResult, command: str, started: datetime.datetime, minutes: float,
            facts: Dict[str, str]) -> str:  # fmt: skip
    """The section of a case that has one of its own (:data:`OWN_SECTION`), between its markers."""
    if result.case == "verbs":  # a table of its own (bench/mabench/verbs.py)
        from .verbs import verbs_section

        lines = verbs_section(result, command, f"{started:%Y-%m-%d %H:%M} UTC ({minutes:.1f} min)", facts)
        return "\n".join([_BEGIN.format(case=result.case), *lines, _END.format(case=result.case)])
    if result.case == "recover":
        from .recover import recover_section

        body = recover_section(result, command, started, minutes, facts)
        return "\n".join([_BEGIN.format(case=result.case), body, _END.format(case=result.case)])
    if result.case in ("history", "hosts"):
        from .history import history_section
        from .hosts import hosts_section

        render = history_section if result.case == "history" else hosts_section
        body = render(result, command, started, minutes, facts)
        return "\n".join([_BEGIN.format(case=result.case), body, _END.format(case=result.case)])
    sizes = list(dict.fromkeys(item.size for item in result.series))  # columns in the order the case gives them
    if all(size.partition("=")[2].isdigit() for size in sizes):
        sizes.sort(key=lambda size: int(size.split("=")[1]))
    subjects: Dict[str, Dict[str, Series]] = {}
    for item in result.series:
        subjects.setdefault(item.subject, {})[item.size] = item
    hosts_note = " (`--hosts 2,64,1024` chooses the sizes)." if result.case == "coordinator" else "."
    out = [_BEGIN.format(case=result.case)]
    out += section_head(_TITLES[result.case], result, command, started, minutes, facts, hosts_note)
    head = ["Subject", *sizes, f"{sizes[-1]} vs {sizes[0]}" if len(sizes) > 1 else "", "Runs"]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for subject, by_size in subjects.items():
        cells = [_md_cell(subject)]
        for size in sizes:
            item = by_size.get(size)
            cells.append("-" if item is None else (fmt_value(item.median, item.unit) if item.median is not None
                                                    else _md_cell(item.error or "no data")))  # fmt: skip
        first, last = by_size.get(sizes[0]), by_size.get(sizes[-1])
        growth = ""
        if first is not None and last is not None and first.median and last.median is not None and len(sizes) > 1:
            growth = fmt_ratio(last.median / first.median)
        runs = max((len(item.samples) for item in by_size.values()), default=0)
        out.append("| " + " | ".join([*cells, growth, str(runs)]) + " |")
    out += ["", "| Target | Measured | Verdict |", "|---|---|---|"]
    out += [f"| {_md_cell(t.claim)} | {_md_cell(t.measured)} | **{t.verdict}** |" for t in result.targets]
    out += ["", "How it was measured:", "", *[f"- {note}" for note in result.notes], ""]
    out += ["What the figures mean:", "", *[f"- {text}" for text in _MEANS.get(result.case, [])]]
    out.append(_END.format(case=result.case))
    return "\n".join(out)


def write_section(result: CaseResult, command: str, started: datetime.datetime, minutes: float,
                  load_at_start: Optional[Sequence[float]] = None) -> str:  # fmt: skip
    """Rewrite the case's own section of docs/performance.md in place (appended when it has none yet); the path.

    The rest of the document is left as it is. The file is replaced atomically."""
    path = REPO / "docs" / "performance.md"
    text = path.read_text() if path.exists() else "# Performance: the shim side by side with torchrun and msrun\n"
    facts = machine_facts()
    if load_at_start is not None:
        facts["load average (1/5/15 min, at the start of the run)"] = ", ".join(f"{x:.2f}" for x in load_at_start)
    new = section(result, command, started, minutes, facts)
    begin, end = _BEGIN.format(case=result.case), _END.format(case=result.case)
    if begin in text and end in text[text.index(begin):]:
        head, rest = text.split(begin, 1)
        text = head + new + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + new + "\n"
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    scratch.write_text(text)
    os.replace(scratch, path)
    return str(path)


def write_docs(
    results: Sequence[CaseResult],
    command: str,
    started: datetime.datetime,
    minutes: float,
    load_at_start: Optional[Sequence[float]] = None,
) -> List[str]:
    """Write docs/performance.md and docs/performance.svg; returns the paths written.

    ``load_at_start``: the load average when the run began (the machine may be shared), shown with the one at
    the end."""
    docs = REPO / "docs"
    docs.mkdir(exist_ok=True)
    series = [item for result in results for item in result.series]
    startup = [s for s in series if s.key.startswith("startup/")]
    teardown = [s for s in series if s.key.startswith("teardown/")]
    svg = render_svg(startup, teardown, f"{command} - {started:%Y-%m-%d} - nproc {len(os.sched_getaffinity(0))}")
    written = []
    if svg:
        (docs / "performance.svg").write_text(svg)
        written.append(str(docs / "performance.svg"))
    facts = machine_facts()
    if load_at_start is not None:
        facts["load average (1/5/15 min, at the start of the run)"] = ", ".join(f"{x:.2f}" for x in load_at_start)
    text = markdown(results, command, started, minutes, facts, "performance.svg" if svg else None)
    (docs / "performance.md").write_text(text)
    written.append(str(docs / "performance.md"))
    return written
