"""``hosts``: ``ma-submit status``, ``list``, ``logs`` and ``logs -f`` of a Volcano job of 1 to 1,024 hosts (issue 28).

The Volcano stand-in is the tests' fake Kubernetes + Volcano API server (``tests/sdk/kubefake.py``: real HTTP on
127.0.0.1, manifests checked with the kubernetes client's models and the Volcano CRD, pods and their logs,
followed logs chunked), run in a process of its own (``workers/kube_standin.py``). For each size N a job of N
hosts is submitted to it with ``ma-submit --backend volcano --detach`` (a kubeconfig the stand-in writes, in a
scratch HOME: the real ``~/.kube`` is never read); once its N pods run (and stay quiet), in rounds whose order
rotates, each a whole process started and waited for:

- a bare interpreter (``python -c pass``), the floor of any command;
- ``ma-submit status ID``, ``ma-submit list --backend volcano`` and ``ma-submit logs ID`` (every host's lines);
- with ``--baseline REF``, the same three verbs from commit REF's tree (mounted on ``PYTHONPATH`` by
  :mod:`.baseline`, the same interpreter and console script).

Then ``ma-submit logs -f ID`` is started and read line by line: the time until it has printed every host's first
line, and the lag of :data:`LAG_LINES` lines, each added to one host's log by the stand-in (a different host each
time; the stand-in stamps ``time.monotonic()`` just before adding it) and stamped here when the follower prints it.
``--only hosts`` rewrites this case's section of ``docs/performance.md`` and ``docs/performance-hosts.svg``.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import queue
import random
import shutil
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Dict, List, Optional, Sequence, Tuple

from .latency import _cpu_seconds
from .procs import PYTHON, REPO, WORKERS, BenchError, bench_env, kill_marked, new_mark, scratch_dir, timed_process
from .results import CaseResult, Series, Target, fmt_ratio, fmt_value, say, section_head
from .svg import render_svg

__all__ = ["LAG_LINES", "SIZES", "hosts_section", "run_hosts"]

SIZES = (1, 16, 128, 1_024)
LAG_LINES = 20
TICK = 0.2  # the stand-in's controller step: Pending -> Running takes two
_MA_SUBMIT = os.path.join(os.path.dirname(PYTHON), "ma-submit")
_SVG = "performance-hosts.svg"
_FLOOR = "bare interpreter (python -c pass)"
_START = "logs -f: start -> every host's first line"
_LAG = "logs -f: a line added -> printed (median of its lines)"
_IDLE = "logs -f: CPU while no line comes (% of one core)"
IDLE_WINDOW = 2.0


class _StandIn:
    """The stand-in process and its one-line-per-command conversation."""

    def __init__(self, kubeconfig: Path, env: Dict[str, str]) -> None:
        argv = [PYTHON, str(WORKERS / "kube_standin.py"), str(kubeconfig), str(TICK)]
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in: IO[str] = self.proc.stdin
        self._out: IO[str] = self.proc.stdout
        ready = self._out.readline()
        if not ready.startswith("ready "):
            raise BenchError(f"hosts: the Volcano stand-in did not start (it said {ready.strip()!r})")

    def ask(self, line: str) -> str:
        self._in.write(line + "\n")
        self._in.flush()
        answer = self._out.readline().strip()
        if not answer or answer.startswith("error"):
            raise BenchError(f"hosts: the stand-in answered {answer!r} to {line[:80]!r}")
        return answer

    def close(self) -> None:
        with contextlib.suppress(BenchError, OSError):
            if self.proc.poll() is None:
                self.ask("quit")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _run(argv: List[str], env: Dict[str, str], what: str) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise BenchError(f"hosts: {what} exited with {done.returncode}: {done.stderr.strip()[-300:]}")
    return done.stdout


def _submit(scratch: Path, env: Dict[str, str], hosts: int) -> str:
    folder = scratch / f"job{hosts}"
    folder.mkdir()
    (folder / "train.py").write_text("print('hi')\n")
    data = {
        "name": f"hosts{hosts}", "run_method": "torchrun", "code_dir": ".", "boot_file": "train.py",
        "image": "registry.example.com/ml/malaunch:0.1.0", "backend": "volcano",
        "resources": {"hosts": hosts, "devices_per_host": 1}, "env": {"MALAUNCH_TEST_SCENARIO": "idle"},
    }  # fmt: skip
    (folder / "job.yaml").write_text(json.dumps(data))
    out = _run([PYTHON, _MA_SUBMIT, "--backend", "volcano", "--detach", str(folder / "job.yaml")], env, "submit")
    return out.strip().splitlines()[-1]


def _wait_running(stand_in: _StandIn, job_id: str, hosts: int) -> None:
    namespace, name = job_id.split("/", 1)
    deadline = time.monotonic() + 120
    while stand_in.ask(f"pods {namespace} {name}") != f"pods {hosts}":
        if time.monotonic() > deadline:
            raise BenchError(f"hosts: job {job_id} did not get its {hosts} pods running within 120 s")
        time.sleep(TICK)


def _time(argv: List[str], env: Dict[str, str]) -> float:
    took, _cpu, code, err = timed_process(argv, env, timeout=600)
    if code != 0:
        raise BenchError(f"hosts: {' '.join(argv[2:5])} exited with {code}: {err[-300:]!r}")
    return took


def _follow(stand_in: _StandIn, job_id: str, hosts: int, env: Dict[str, str]) -> Tuple[float, float, List[float]]:
    """(start -> every host's first line, the idle follower's CPU in % of a core, each added line's lag) of one
    ``ma-submit logs -f``."""
    namespace, name = job_id.split("/", 1)
    lines: queue.Queue[Tuple[float, str]] = queue.Queue()
    started = time.monotonic()
    follower = subprocess.Popen([PYTHON, _MA_SUBMIT, "logs", "-f", job_id], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    stream = follower.stdout
    assert stream is not None

    def read() -> None:
        for raw in stream:
            lines.put((time.monotonic(), raw.decode(errors="replace")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        seen, first = set(), started
        while len(seen) < hosts:
            when, text = lines.get(timeout=120)
            if "hello from host" in text:
                seen.add(text.split("]", 1)[0])
                first = when
        time.sleep(0.5)  # the last reader's thread settles
        cpu = _cpu_seconds(follower.pid)
        time.sleep(IDLE_WINDOW)
        idle = 100 * (_cpu_seconds(follower.pid) - cpu) / IDLE_WINDOW
        lags = []
        for number in range(LAG_LINES):
            time.sleep(random.uniform(0.02, 0.05))
            marker = f"lag-{number}-{random.getrandbits(32):08x}"
            stamp = float(stand_in.ask(f"append {namespace} {name} {(number * 7919) % hosts} {marker}").split()[1])
            while True:
                when, text = lines.get(timeout=60)
                if marker in text:
                    lags.append(when - stamp)
                    break
        return first - started, idle, lags
    except queue.Empty:
        raise BenchError(f"hosts: logs -f of {job_id} printed nothing for a minute") from None
    finally:
        follower.terminate()  # ours, started above and still unreaped: its pid is its own
        try:
            follower.wait(timeout=20)
        except subprocess.TimeoutExpired:
            follower.kill()
            follower.wait()
        reader.join(timeout=5)


def run_hosts(reps: int, sizes: Sequence[int] = SIZES, baseline: Optional[str] = None) -> CaseResult:
    """Measure every subject at every size: ``reps`` rounds of the whole processes and ``reps`` followers; with
    ``baseline`` (a commit), that commit's ``status``, ``list`` and ``logs`` too, in the same rounds."""
    farm: Optional[Path] = None
    if baseline is not None:
        from .baseline import FARMS, prepare_farms

        baseline = prepare_farms(baseline)
        farm = FARMS["baseline"]
    scratch = scratch_dir("hosts")
    mark = new_mark()
    kubeconfig = scratch / "kubeconfig"
    env = bench_env(mark, {"MALAUNCH_HOME": str(scratch / "home"), "HOME": str(scratch),
                           "KUBECONFIG": str(kubeconfig)})  # fmt: skip
    series: List[Series] = []
    stand_in = _StandIn(kubeconfig, env)
    try:
        for hosts in sizes:
            job_id = _submit(scratch, env, hosts)
            _wait_running(stand_in, job_id, hosts)
            subjects = _subjects(job_id, env, baseline, farm)
            row = {name: Series(f"hosts/{hosts}/{name}", "hosts", name, f"{hosts} hosts", "s") for name in subjects}
            for argv, run_env in subjects.values():
                _time(argv, run_env)  # untimed: the page cache, the job index
            order = list(subjects.items())
            for shift in range(reps):
                for name, (argv, run_env) in [*order[shift % len(order) :], *order[: shift % len(order)]]:
                    row[name].samples.append(_time(argv, run_env))
            start = Series(f"hosts/{hosts}/follow-start", "hosts", _START, f"{hosts} hosts", "s")
            lag = Series(f"hosts/{hosts}/follow-lag", "hosts", _LAG, f"{hosts} hosts", "s")
            idle = Series(f"hosts/{hosts}/follow-idle-cpu", "hosts", _IDLE, f"{hosts} hosts", "%")
            for _ in range(reps):
                took, cpu, lags = _follow(stand_in, job_id, hosts, env)
                start.samples.append(took)
                idle.samples.append(cpu)
                lag.samples.append(statistics.median(lags))
            series += [*row.values(), start, lag, idle]
            namespace, name = job_id.split("/", 1)
            stand_in.ask(f"delete {namespace} {name}")
            say(f"hosts: {hosts} host(s) done")
    finally:
        stand_in.close()
        kill_marked(mark)
        shutil.rmtree(scratch, ignore_errors=True)
    return CaseResult("hosts", series, _targets(series, sizes, baseline), _notes(reps, baseline))


def _subjects(
    job_id: str, env: Dict[str, str], baseline: Optional[str], farm: Optional[Path]
) -> Dict[str, Tuple[List[str], Dict[str, str]]]:
    """The timed whole processes (name -> argv, environment): with a baseline, its verbs from its farm as well."""
    verbs = {
        "status ID": [PYTHON, _MA_SUBMIT, "status", job_id],
        "list --backend volcano": [PYTHON, _MA_SUBMIT, "list", "--backend", "volcano"],
        "logs ID": [PYTHON, _MA_SUBMIT, "logs", job_id],
    }
    subjects = {_FLOOR: ([PYTHON, "-c", "pass"], env), **{name: (argv, env) for name, argv in verbs.items()}}
    if baseline is not None and farm is not None:
        theirs = {**env, "PYTHONPATH": str(farm)}
        subjects.update({f"{name} @{baseline}": (argv, theirs) for name, argv in verbs.items()})
    return subjects


def _median(series: Sequence[Series], subject: str, hosts: int) -> Optional[float]:
    found = [s.median for s in series if s.subject == subject and s.size == f"{hosts} hosts"]
    return found[0] if found else None


def _targets(series: Sequence[Series], sizes: Sequence[int], baseline: Optional[str] = None) -> List[Target]:
    """Each verb at the largest size against its figure at the smallest (the issue sets no bound: n/a); with a
    baseline, each verb against that commit's at every size, in the same rounds (for information too)."""
    first, last = sizes[0], sizes[-1]
    out = []
    for subject, unit in dict.fromkeys((s.subject, s.unit) for s in series):
        one, many = _median(series, subject, first), _median(series, subject, last)
        measured = "-" if not one or many is None else (
            f"{fmt_value(many, unit)} vs {fmt_value(one, unit)}: {fmt_ratio(many / one)}")  # fmt: skip
        out.append(Target(f"{subject}: {last:,} hosts against {first}", measured, None, "growth, for information"))
    for subject in dict.fromkeys(s.subject for s in series if baseline is not None and f" @{baseline}" in s.subject):
        ours_name = subject.split(" @")[0]
        for hosts in sizes:
            ours, theirs = _median(series, ours_name, hosts), _median(series, subject, hosts)
            measured = "-" if not theirs or ours is None else (
                f"{fmt_value(ours, 's')} vs {fmt_value(theirs, 's')}: {fmt_ratio(ours / theirs)}")  # fmt: skip
            out.append(Target(f"{ours_name} at {hosts:,} hosts: this tree against commit {baseline}'s", measured,
                              None, "side by side, for information"))  # fmt: skip
    return out


def _notes(reps: int, baseline: Optional[str] = None) -> List[str]:
    theirs = [] if baseline is None else [
        f"hosts: status, list and logs @{baseline}: the same console script and interpreter with commit "
        f"{baseline}'s sdk/ and entrypoint/ first on PYTHONPATH, timed in the same rounds as this tree's (logs -f "
        "is this tree's only)"
    ]  # fmt: skip
    return [
        *theirs,
        "hosts: the Volcano stand-in is tests/sdk/kubefake.py in a process of its own (real HTTP on 127.0.0.1, one "
        f"thread per connection, controller step {TICK * 1000:.0f} ms); each job is submitted with ma-submit "
        "--backend volcano --detach and measured once its pods run (quiet: no output after their first line)",
        f"hosts: {reps} rounds of python -c pass, status, list and logs per size, in an order rotated per round, "
        "after one untimed run of each; each run is a whole process (start to exit), wall time",
        f"hosts: logs -f {reps} times per size: start -> the last host's first line printed; its CPU time over "
        f"{IDLE_WINDOW:g} s with nothing to print (every thread's schedstat; shorter than its 10 s between two "
        f"listings of the pods, so mostly the job's poll); then {LAG_LINES} lines added 20-50 ms "
        "apart, each to another host's log; a run's lag is the median of its lines, the figure the median over the "
        "runs (CLOCK_MONOTONIC is one clock for the stand-in and this process)",
        "hosts: the stand-in shares the machine's cores with the command measured (its work per request, JSON of "
        "every pod, is in the figures): on a real cluster that work is the API server's",
    ]


def hosts_section(result: CaseResult, command: str, started: datetime.datetime, minutes: float,
                  facts: Dict[str, str], docs: Path = REPO / "docs") -> str:  # fmt: skip
    """This case's section of docs/performance.md (its plot is written beside it, ``docs/performance-hosts.svg``;
    ``docs``: another folder for the plot)."""
    sizes = sorted({int(s.size.split()[0]) for s in result.series})
    subjects = list(dict.fromkeys(s.subject for s in result.series))
    out = section_head("Hosts: status, list, logs and logs -f from 1 to 1,024 hosts (Volcano stand-in)", result,
                       command, started, minutes, facts, ". Medians.")  # fmt: skip
    last = f"{sizes[-1]:,} vs {sizes[0]}" if len(sizes) > 1 else ""
    out += ["| Subject | " + " | ".join(f"{n:,} hosts" for n in sizes) + f" | {last} | Runs |",
            "|" + "---|" * (len(sizes) + 3)]  # fmt: skip
    for subject in subjects:
        unit = next(s.unit for s in result.series if s.subject == subject)
        cells = [fmt_value(_median(result.series, subject, n), unit) for n in sizes]
        one, many = _median(result.series, subject, sizes[0]), _median(result.series, subject, sizes[-1])
        growth = fmt_ratio(many / one) if one and many is not None and len(sizes) > 1 else ""
        runs = max((len(s.samples) for s in result.series if s.subject == subject), default=0)
        out.append(f"| {subject} | " + " | ".join(cells) + f" | {growth} | {runs} |")
    svg = _plot(result, f"{command} - {started:%Y-%m-%d} - nproc {facts.get('nproc')}")
    if svg:
        (docs / _SVG).write_text(svg)
        out += ["", f"![status, list, logs and logs -f by the number of hosts]({_SVG})"]
    out += ["", "How it was measured:", "", *[f"- {note}" for note in result.notes], ""]
    out += [
        "What the figures mean: `status` and `list` read the job and its pods in pages (500 asked; the stand-in "
        "answers at most 250 a page, so 5 pages for 1,024 pods, 3 on an API server), decoded as plain JSON, so "
        "they hardly grow with the hosts. `logs` needs one request per host (the API has no other way): it "
        "prints host after host and reads the next 8 hosts' logs meanwhile. `logs -f` follows each host on a "
        "connection of its own and asks for the job once a second, for its pods every 10 s while all run: its "
        "start grows with the connections it opens, its lag is that of one stream, and its CPU while idle is "
        "the job's poll and that listing of every pod (it grows with the hosts). Every figure starts with the "
        "interpreter and the imports of the kubernetes client's configuration and of requests (about 0.3 s on "
        "this machine; the backend no longer builds the client's `CoreV1Api`, which took about 0.9 s more): that, "
        "not the hosts, is most of the 1-host figures. The kubernetes part is its configuration loader, and it "
        "stays: `python -X importtime` shows `kubernetes.config.kube_config` as 100 to 185 ms of the package's "
        "122 to 230 ms (requests and yaml already loaded; 2-core machine at a load average of 14 to 17), since "
        "it imports pydantic (through `kubernetes.client.api_response`), oauthlib and requests-oauthlib (OIDC) "
        "and dateutil; the package's `__init__`, which imports every part, adds only 10 to 30 ms (its API "
        "models load lazily), so importing the loader alone would gain little. Removing it would mean reading "
        "the kubeconfig ourselves (client certificates, tokens and token files, exec plugins and their "
        "refresh, the in-cluster account's rotating token): security-relevant code the client keeps correct, "
        "not redone here."
    ]
    return "\n".join(out)


def _plot(result: CaseResult, caption: str) -> Optional[str]:
    def labelled(subjects: Sequence[str]) -> List[Series]:
        return [Series(s.key, s.case, f"{s.subject}, {s.size}", s.size, s.unit, s.samples, error=s.error)
                for s in result.series if s.subject in subjects]  # fmt: skip

    verbs = labelled([_FLOOR, "status ID", "list --backend volcano", "logs ID"])
    follow = labelled([_START, _LAG])
    titles = ("ma-submit status, list, logs by hosts in the job (median; line: min-max)", "ma-submit logs -f by hosts")
    return render_svg(verbs, follow, caption, titles)
