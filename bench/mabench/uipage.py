"""``ui``: ``ma-submit ui``'s three promises (issue 40), measured against the real server process.

- **Jobs page, server time**: a home with 10 and with 10,000 ended jobs (one real job, then copies of its folder
  as hard links, as the history case grows a home); the whole answer to ``GET /`` over a kept-alive loopback
  connection, timed by the client from the request to the last byte (so it bounds the server's time from above).
  Each size's first load is timed apart (it builds the history index, as the first ``list`` does, and starts
  counting the rows' restarts in the background); after 3 s, when that count is kept, the page is timed again.
- **A rank's line in the open page**: a running local job whose rank prints a line with its own clock reading
  every 1.5 s; the job's page is open in Debian's headless Chromium (Selenium), following host 0's log; a
  MutationObserver in the page notes when each line arrives. Latency = the browser's clock at arrival less the
  rank's at the write (one machine, one clock).
- **Idle CPU**: the server's own CPU time (``/proc/PID/stat``) over 20 s with no page open, as a share of one core.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .procs import PYTHON, BenchError, bench_env, kill_marked, new_mark, scratch_dir
from .results import CaseResult, Series, Target, fmt_value, say

__all__ = ["run_ui"]

SIZES = (10, 10_000)
_URL = re.compile(r"the jobs page is at http://127\.0\.0\.1:(\d+)/\?token=(\S+) ")
_MA_SUBMIT = os.path.join(os.path.dirname(PYTHON), "ma-submit")
_TICKER = (
    "import time\n"
    "for n in range(LINES + 6):\n"
    "    time.sleep(1.5)\n"
    "    print(f'tick {n} at {time.time():.6f}', flush=True)\n"
    "time.sleep(600)\n"
)
_OBSERVE = (
    "window.__seen = []; window.__since = Date.now() / 1000;"
    "new MutationObserver(function (changes) { changes.forEach(function (c) { c.addedNodes.forEach(function (n) {"
    " window.__seen.push([Date.now() / 1000, n.textContent]); }); }); })"
    ".observe(document.getElementById('log'), {childList: true});"
)


def _submit(code: Path, env: Dict[str, str], name: str, script: str, detach: bool) -> None:
    code.mkdir(parents=True, exist_ok=True)
    (code / "boot.py").write_text(script)
    (code / "job.yaml").write_text(json.dumps({"name": name, "code_dir": ".", "boot_file": "boot.py"}))
    argv = [_MA_SUBMIT, *(["--detach"] if detach else []), str(code / "job.yaml")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise BenchError(f"ui: the job {name} failed to run (exit {done.returncode}): {done.stderr.strip()[-300:]}")


def _grow(home: Path, want: int) -> None:
    jobs = home / "jobs"
    copies = [path for path in jobs.iterdir() if re.search(r"-c\d{5}\Z", path.name)]
    (source,) = [path for path in jobs.iterdir() if path.is_dir() and path not in copies]
    stem = source.name.rsplit("-", 1)[0]
    for index in range(len(copies), want - 1):
        shutil.copytree(source, jobs / f"{stem}-c{index:05d}", copy_function=os.link)


class _Server:
    def __init__(self, env: Dict[str, str], scratch: Path) -> None:
        self.err = open(scratch / "ui.err", "w+")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen([_MA_SUBMIT, "ui", "--port", "0", "--no-browser"], env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.err)  # fmt: skip
        deadline = time.monotonic() + 60
        found = None
        while found is None:
            self.err.seek(0)
            found = _URL.search(self.err.read())
            if found is None:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise BenchError(f"ui: ma-submit ui did not start: {(scratch / 'ui.err').read_text()[-300:]}")
                time.sleep(0.05)
        self.port, self.token = int(found.group(1)), found.group(2)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        self.cookie = ""

    def get(self, path: str) -> Tuple[float, int, str]:
        start = time.perf_counter()
        self.conn.request("GET", path, headers={"Cookie": self.cookie} if self.cookie else {})
        answer = self.conn.getresponse()
        body = answer.read()
        took = time.perf_counter() - start
        if not self.cookie:
            self.cookie = (answer.getheader("Set-Cookie") or "").split(";", 1)[0]
        return took, answer.status, body.decode("utf-8", "replace")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.conn.close()
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        self.err.close()


def _list_page(home: Path) -> float:
    """The SDK's own part of the page, in this process: the local backend's list_page of the newest 50."""
    from malaunch.sdk.backends.listing import ListQuery
    from malaunch.sdk.backends.local.backend import LocalBackend

    backend = LocalBackend(home=str(home))
    start = time.perf_counter()
    backend.list_page(ListQuery(limit=50), now=time.time())
    return time.perf_counter() - start


def _page_times(reps: int, series: Dict[int, Series], first: Dict[int, Series], index: Dict[int, Series],
                idle: Series) -> None:  # fmt: skip
    scratch = scratch_dir("ui-jobs")
    mark = new_mark()
    env = bench_env(mark, {"MALAUNCH_HOME": str(scratch / "home")})
    try:
        _submit(scratch / "code", env, "page", "print('done', flush=True)\n", detach=False)
        for size in SIZES:
            _grow(scratch / "home", size)
            server = _Server(env, scratch)
            try:
                server.get(f"/?token={server.token}")  # the cookie
                took, status, body = server.get("/")  # the first load: the history index is built here
                shown = len(re.findall(r'<tr data-id="', body))
                if status != 200 or shown != min(size, 50):
                    raise BenchError(f"ui: the jobs page of {size} jobs answered {status} with {shown} rows")
                first[size].samples.append(took)
                time.sleep(3.0)  # the rows' restarts are counted in the background meanwhile, then kept
                for _ in range(reps):
                    series[size].samples.append(server.get("/")[0])
                    index[size].samples.append(_list_page(scratch / "home"))
                if size == SIZES[0]:  # nothing is asked from here on
                    before, start = server.cpu_seconds(), time.monotonic()
                    time.sleep(20.0)
                    idle.samples.append(100 * (server.cpu_seconds() - before) / (time.monotonic() - start))
            finally:
                server.stop()
    finally:
        kill_marked(mark)
        shutil.rmtree(scratch, ignore_errors=True)


def _line_latency(lines: int, latency: Series) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    scratch = scratch_dir("ui-line")
    mark = new_mark()
    env = bench_env(mark, {"MALAUNCH_HOME": str(scratch / "home")})
    driver = None
    server: Optional[_Server] = None
    try:
        _submit(scratch / "code", env, "ticker", f"LINES = {lines}\n{_TICKER}", detach=True)
        (job_id,) = os.listdir(scratch / "home" / "jobs")
        server = _Server(env, scratch)
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         f"--user-data-dir={scratch / 'chromium'}"):  # fmt: skip
            options.add_argument(argument)
        # Chromium keeps crash reports and caches under $HOME/.config and $HOME/.cache whatever --user-data-dir says:
        # its home is the scratch folder, never the user's.
        browser_home = str(scratch / "browser-home")
        browser_env = {**env, "HOME": browser_home, "XDG_CONFIG_HOME": f"{browser_home}/.config",
                       "XDG_CACHE_HOME": f"{browser_home}/.cache"}  # fmt: skip
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver", env=browser_env), options=options)
        driver.get(f"http://127.0.0.1:{server.port}/?token={server.token}")
        driver.get(f"http://127.0.0.1:{server.port}/job?b=local&id={job_id}")
        driver.execute_script(_OBSERVE)
        deadline = time.monotonic() + 1.5 * lines + 60
        since = float(driver.execute_script("return window.__since"))
        fresh: List[float] = []
        while time.monotonic() < deadline and len(fresh) < lines:
            time.sleep(0.2)
            fresh = []
            for when, text in driver.execute_script("return window.__seen"):
                found = re.search(r"tick \d+ at (\d+\.\d+)", str(text))
                if found and float(found.group(1)) > since:  # written while the page was open
                    fresh.append(float(when) - float(found.group(1)))
        latency.samples.extend(fresh[:lines])
        if not latency.samples:
            raise BenchError("ui: no rank line reached the open page")
    finally:
        if driver is not None:
            driver.quit()
        if server is not None:
            server.stop()
        kill_marked(mark)
        shutil.rmtree(scratch, ignore_errors=True)


def run_ui(reps: int) -> CaseResult:
    """The three figures (see the module docstring), ``reps * 4`` page loads per size and ``reps * 2`` lines."""
    pages = {size: Series(f"ui/jobs/{size}", "ui", "jobs page, GET / whole answer (loopback)", f"jobs={size}", "s")
             for size in SIZES}  # fmt: skip
    first = {size: Series(f"ui/first/{size}", "ui", "jobs page, first load of a fresh server", f"jobs={size}", "s")
             for size in SIZES}  # fmt: skip
    index = {size: Series(f"ui/index/{size}", "ui", "of which the SDK's list_page (in-process, between the loads)",
                          f"jobs={size}", "s") for size in SIZES}  # fmt: skip
    idle = Series("ui/idle", "ui", "idle server, CPU share of one core over 20 s", "jobs=10", "%")
    line = Series("ui/line", "ui", "a rank's line -> shown in the open page (Chromium)", "jobs=10", "s")
    steps = ((lambda: _page_times(reps * 4, pages, first, index, idle), "jobs page and idle", pages[SIZES[-1]]),
             (lambda: _line_latency(reps * 2, line), "line latency", line))
    for run, what, item in steps:
        try:
            run()
        except (BenchError, OSError, subprocess.SubprocessError) as exc:
            item.error = str(exc).splitlines()[0]
            say(f"  ui {what}: FAILED: {exc}")
    big, small = pages[SIZES[-1]], pages[SIZES[0]]
    say(f"  ui: jobs page {fmt_value(small.median, 's')} at 10, {fmt_value(big.median, 's')} at 10,000; line "
        f"{fmt_value(line.median, 's')} (max {fmt_value(max(line.samples, default=None), 's')}); idle "
        f"{fmt_value(idle.median, '%')}")  # fmt: skip
    worst = max(line.samples, default=None)
    targets = [
        Target("jobs page with 10,000 ended jobs within 100 ms (median whole answer)", fmt_value(big.median, "s"),
               None if big.median is None else big.median <= 0.100,
               f"10 jobs: {fmt_value(small.median, 's')}; the SDK's list_page alone at 10,000: "
               f"{fmt_value(index[SIZES[-1]].median, 's')}"),
        Target("a rank's line shows in the open page within 1 s (every line)", f"max {fmt_value(worst, 's')}",
               None if worst is None else worst <= 1.0, f"median {fmt_value(line.median, 's')}"),
        Target("the idle server under 1 % of a core", fmt_value(idle.median, "%"),
               None if idle.median is None else idle.median < 1.0),
    ]  # fmt: skip
    result = CaseResult("ui", [small, big, index[SIZES[0]], index[SIZES[-1]], first[SIZES[0]], first[SIZES[-1]], line,
                               idle], targets)  # fmt: skip
    result.notes += [
        f"ui: jobs page = {reps * 4} GETs of / per size on one kept-alive connection, 3 s after the first load "
        "(timed apart: it builds the history index and starts counting the rows' restarts); 50 rows a page, each "
        "row's hosts read from its status",
        f"ui: line latency = {reps * 2} lines of a running local job (one every 1.5 s), the job's page open in "
        "headless Chromium following host 0's log; browser clock at arrival less the rank's clock at the write",
        "ui: idle = the server's utime+stime over 20 s with no page open, after a page was served",
    ]
    return result
