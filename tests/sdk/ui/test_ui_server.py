"""``ma-submit ui`` over HTTP (no browser): the token, the cookie, CSRF, the Host, the log files it serves, the
jobs page's paging and filters, the start and the end of the verb; and the pure parts (escaping, the attempts).

Against the real ``ma-submit ui`` process and real local jobs (a job that fails, restarts and succeeds; copies
of an ended job's folder for paging, as the history bench grows a home).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, List

import pytest
import requests
from malaunch.sdk.backends.events import JobEvent
from malaunch.sdk.backends.inside import HostUsage, UsageReport
from malaunch.sdk.backends.job_index import JobIndex
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.errors import JobNotRunning
from malaunch.sdk.status import HostState, HostStatus, JobState, JobStatus
from malaunch.sdk.ui.auth import Guard
from malaunch.sdk.ui.command import shown_backends
from malaunch.sdk.ui.logfiles import LogRefused, host_folders, read_log
from malaunch.sdk.ui.markup import Markup, html, join
from malaunch.sdk.ui.pages import usage_part
from malaunch.sdk.ui.server import Handler
from malaunch.sdk.ui.svg import timeline_svg
from malaunch.sdk.ui.timeline import timeline_of
from malaunch.sdk.ui.usage import UsageWatch
from sdkutil import VENV_BIN, job_ids, ma_submit, wait_for, write_job
from uiutil import Ui, page_server, start_ui, stop_ui

#: Fails in attempt 0 (exit 3) after printing a line with markup; succeeds in attempt 1.
FLAKY = """
    import os, sys
    attempt = int(os.environ["MALAUNCH_ATTEMPT"])
    print(f"attempt {attempt} says <script>alert('x')</script> & more", flush=True)
    sys.exit(3 if attempt == 0 else 0)
"""


def _flaky_job(tmp_path: Path, env: Dict[str, str]) -> str:
    job = write_job(tmp_path / "flaky", FLAKY, name="flaky", resources={"hosts": 2},
                    launcher={"max_restarts": 2, "restart_on": "always"})  # fmt: skip
    done = ma_submit([str(job)], env)
    assert done.returncode == 0, done.stderr
    (job_id,) = job_ids(Path(env["MALAUNCH_HOME"]))
    return job_id


def _session(ui: Ui) -> requests.Session:
    session = requests.Session()
    first = session.get(ui.url, allow_redirects=False, timeout=30)
    assert first.status_code == 303 and first.headers["Location"] == "/", first.headers
    cookie = first.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie, cookie
    return session


# -- pure parts ----------------------------------------------------------------------------------------------


def test_every_value_is_escaped_unless_it_is_markup() -> None:
    page = html("<p title=\"{t}\">{x}</p>{m}", t='a"b', x="<script>alert(1)</script>", m=Markup("<br>"))
    assert page == '<p title="a&quot;b">&lt;script&gt;alert(1)&lt;/script&gt;</p><br>'
    assert join(["<b>", Markup("<i>")], " ") == "&lt;b&gt; <i>"
    assert html("{n:.2f}", n=1.234) == "1.23"


def test_the_attempts_come_from_the_restarts_the_events_record() -> None:
    hosts = (HostStatus(0, "127.0.0.1", HostState.EXITED, exit_code=0),)
    status = JobStatus("j", "local", JobState.SUCCEEDED, 0, created_at=100.0, started_at=100.0, ended_at=130.0,
                       hosts=hosts)  # fmt: skip
    events = [
        JobEvent(100.0, "host 0", "Started", "127.0.0.1"),
        JobEvent(110.0, "host 1", "Restarted", "attempt 0 ended with exit code 1 (user_error); peer", "Warning", 1),
        JobEvent(110.0, "host 0", "Restarted", "attempt 0 ended with exit code 3 (user_error); root cause rank 0 "
                 "exited with 3, log <b>x</b>", "Warning", 0),
        JobEvent(115.0, "host 1", "HostLost", "lost for good", "Warning", 1),
        JobEvent(120.0, "host 0", "Restarted", "attempt 1 ended with exit code 124 (hang); root cause rank 0",
                 "Warning"),
        JobEvent(130.0, "job", "Succeeded", "exit code 0"),
    ]  # fmt: skip
    line = timeline_of(status, events, now=200.0)
    assert [(a.number, a.start, a.end, a.outcome, a.hang) for a in line.attempts] == [
        (0, 100.0, 110.0, "restarted", False), (1, 110.0, 120.0, "restarted", True),
        (2, 120.0, 130.0, "succeeded", False),
    ]  # fmt: skip
    assert "root cause rank 0 exited with 3" in line.attempts[0].cause  # the host that was the cause, not the peer
    assert [(m.time, m.kind) for m in line.markers] == [(115.0, "lost")]
    svg = timeline_svg(line, 200.0)
    assert "log &lt;b&gt;x&lt;/b&gt;" in svg and "<b>x</b>" not in svg
    assert svg.count('class="attempt"') == 3 and 'data-kind="lost"' in svg


def test_a_restart_of_the_whole_job_reported_by_every_host_is_one_attempt() -> None:
    status = JobStatus("j", "local", JobState.SUCCEEDED, 0, created_at=100.0, started_at=100.0, ended_at=130.0)
    said = "attempt 0 of the job ended: root cause rank 0 on host 0 (127.0.0.1) exited with 3; class user_error"
    events = [
        JobEvent(110.0, "host 0", "Restarted", f"{said}; this host started the next attempt", "Warning", 0),
        JobEvent(110.5, "host 1", "Restarted", f"{said}; this host started the next attempt", "Warning", 1),
        JobEvent(130.0, "job", "Succeeded", "exit code 0"),
    ]  # fmt: skip
    line = timeline_of(status, events, now=200.0)
    assert [(a.number, a.outcome) for a in line.attempts] == [(0, "restarted"), (1, "succeeded")]
    assert line.attempts[0].cause.startswith(said)


def test_the_guard_wants_the_token_once_then_the_cookie_and_the_loopbacks_host() -> None:
    guard = Guard("127.0.0.1", 8765, token="t0ken")
    assert not guard.check(None, {}, "127.0.0.1:8765").ok
    assert not guard.check("wrong", {}, "127.0.0.1:8765").ok
    assert guard.check("t0ken", {}, "127.0.0.1:8765") == (True, "", True)
    assert guard.check(None, {guard.cookie: "t0ken"}, "localhost:8765").ok
    rebound = guard.check(None, {guard.cookie: "t0ken"}, "evil.example:8765")
    assert not rebound.ok and "Host header" in rebound.why
    assert not guard.check_post("forged", None, "127.0.0.1:8765").ok
    assert not guard.check_post(guard.csrf, "http://evil.example", "127.0.0.1:8765").ok
    assert guard.check_post(guard.csrf, "http://127.0.0.1:8765", "127.0.0.1:8765").ok


def test_only_the_hosts_own_log_files_are_read_and_no_link_is_followed(tmp_path: Path) -> None:
    job = tmp_path / "job"
    (job / "hosts" / "0" / "logs" / "attempt-0").mkdir(parents=True)
    (job / "hosts" / "0" / "console.log").write_text("one\ntwo\nthree, half")
    (job / "hosts" / "0" / "logs" / "attempt-0" / "rank-0.log").write_text("rank line\n")
    (job / "state.json").write_text("{}")
    (tmp_path / "secret.log").write_text("secret\n")
    os.symlink(tmp_path / "secret.log", job / "hosts" / "0" / "logs" / "linked.log")
    os.symlink(tmp_path, job / "hosts" / "0" / "logs" / "outside")
    folders = host_folders(str(job), [str(job / "hosts" / "0" / "console.log"), None, "https://console/x"])
    assert folders == ["hosts/0"]
    chunk = read_log(str(job), folders, "hosts/0/console.log", 0)
    assert chunk.lines == ("one", "two") and chunk.offset == len("one\ntwo\n")  # a half line waits for its end
    assert read_log(str(job), folders, "hosts/0/console.log", 0, "TW").lines == ("two",)
    assert read_log(str(job), folders, "hosts/0/logs/attempt-0/rank-0.log", 0).lines == ("rank line",)
    refused = ("hosts/0/../../secret.log", "hosts/0/logs/linked.log", "hosts/0/logs/outside/secret.log", "/etc/passwd",
               "state.json", "hosts/1/console.log", "hosts/0/./console.log", "hosts//0/console.log")
    for path in refused:
        with pytest.raises(LogRefused):
            read_log(str(job), folders, path, 0)


def test_usage_is_sampled_while_asked_and_drawn_per_host(tmp_path: Path) -> None:
    reports = [UsageReport("j", (HostUsage(0, "127.0.0.1", cpu_cores=0.5 + n, memory_bytes=(100 + n) << 20),
                                 HostUsage(1, "127.0.0.2", cpu_cores=1.0, memory_bytes=50 << 20)), source="/proc")
               for n in range(3)]  # fmt: skip

    def usage() -> UsageReport:
        if not reports:
            raise JobNotRunning("j", "SUCCEEDED", "top needs a running job")
        return reports.pop(0)

    watch = UsageWatch(every=0.01)
    wait_for(lambda: watch.read(("local", "j"), usage)[1] != "", 30, "the sampler to see the job end")
    samples, note = watch.read(("local", "j"), usage)
    assert [s.report.hosts[0].cpu_cores for s in samples] == [0.5, 1.5, 2.5]
    assert "SUCCEEDED" in note
    part = usage_part(samples, note)
    assert part.count('class="series"') == 4  # CPU and memory, one line per host
    assert "host 0" in part and "host 1" in part and "from /proc" in part


def test_the_page_shows_local_the_profiles_backend_and_those_the_index_has(ui_env: Dict[str, str],
                                                                            home: Path) -> None:  # fmt: skip
    JobIndex.default(ui_env, str(home)).record("abc-uuid", "modelarts")
    assert shown_backends((), None, str(home)) == ["local", "modelarts"]
    assert shown_backends(("volcano",), None, str(home)) == ["local", "modelarts", "volcano"]


# -- the verb ------------------------------------------------------------------------------------------------


def test_a_port_in_use_is_one_line_and_0_0_0_0_warns_in_one_line(ui_env: Dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([os.path.join(VENV_BIN, "ma-submit"), "ui", "--port", str(port), "--no-browser"],
                              env=ui_env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2, done
    assert done.stderr == (f"ma-submit: error: port {port} on 127.0.0.1 is in use; pick another with --port N, or "
                           "--port 0 for a free one\n")  # fmt: skip
    wide = start_ui(ui_env, "--host", "0.0.0.0")
    said = stop_ui(wide)
    warnings = [line for line in said.splitlines() if "warning" in line]
    assert warnings == ["ma-submit: warning: listening on 0.0.0.0: other machines can reach this page (the token "
                        "still guards it)"]  # fmt: skip


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_requests_without_the_token_a_forged_csrf_and_a_climbing_log_path_are_refused(
    tmp_path: Path, ui_env: Dict[str, str], ui: Ui
) -> None:
    job_id = _flaky_job(tmp_path, ui_env)
    bare = requests.get(f"{ui.base}/job?b=local&id={job_id}", timeout=30)
    assert bare.status_code == 403 and "needs the token" in bare.text and job_id not in bare.text
    assert requests.get(f"{ui.base}/?token=nope", timeout=30).status_code == 403
    assert requests.get(f"{ui.base}/static/app.js", timeout=30).status_code == 403
    session = _session(ui)
    page = session.get(f"{ui.base}/job", params={"b": "local", "id": job_id}, timeout=30)
    assert page.status_code == 200 and job_id in page.text
    assert page.text.count("<script") == 1  # the page's own app.js only
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    forged = session.post(f"{ui.base}/action", data={"csrf": "0" * 64, "action": "delete", "b": "local", "id": job_id},
                          timeout=30)  # fmt: skip
    assert forged.status_code == 403 and "CSRF" in forged.text
    assert job_ids(Path(ui_env["MALAUNCH_HOME"])) == [job_id]  # nothing was deleted
    confirm = session.get(f"{ui.base}/confirm", params={"action": "delete", "b": "local", "id": job_id}, timeout=30)
    csrf = re.findall(r'name="csrf" value="(\w+)"', confirm.text)
    assert len(csrf) == 1
    other = session.post(f"{ui.base}/action", headers={"Origin": "http://evil.example"}, timeout=30,
                         data={"csrf": csrf[0], "action": "delete", "b": "local", "id": job_id})  # fmt: skip
    assert other.status_code == 403 and "another site" in other.text
    for path in ("hosts/0/../../../state.json", "hosts/0/../../plan.json", "/etc/passwd", "plan.json"):
        refused = session.get(f"{ui.base}/log", params={"b": "local", "id": job_id, "file": path}, timeout=30)
        assert refused.status_code == 403 and "log path refused" in refused.json()["error"], path
    rebound = session.get(f"{ui.base}/", headers={"Host": "evil.example"}, timeout=30)
    assert rebound.status_code == 403
    # a log file of the job is served as the rank wrote it: attempt 1's line (that attempt runs to its end on both
    # hosts; in attempt 0, rank 0's failure may end host 1's rank before it printed)
    lines = session.get(f"{ui.base}/log", params={"b": "local", "id": job_id, "file": "hosts/1/console.log"},
                        timeout=30).json()["lines"]  # fmt: skip
    assert "[rank 1] attempt 1 says <script>alert('x')</script> & more" in lines


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_the_jobs_page_pages_and_filters_through_the_index(tmp_path: Path, ui_env: Dict[str, str]) -> None:
    job_id = _flaky_job(tmp_path, ui_env)
    jobs = Path(ui_env["MALAUNCH_HOME"]) / "jobs"
    stem = job_id.rsplit("-", 1)[0]
    for index in range(119):  # copies of the ended job's folder, as the history bench grows a home
        shutil.copytree(jobs / job_id, jobs / f"{stem}-c{index:05d}", copy_function=os.link)
    ui = start_ui(ui_env)
    try:
        session = _session(ui)

        def ids(**query: object) -> List[str]:
            page = session.get(f"{ui.base}/", params=query, timeout=30)
            assert page.status_code == 200
            return re.findall(r'<tr data-id="([^"]+)"', page.text)

        first, second, third = ids(), ids(offset=50), ids(offset=100)
        assert (len(first), len(second), len(third)) == (50, 50, 20)
        assert len(set(first + second + third)) == 120
        assert ids(state="failed") == [] and len(ids(state="succeeded", offset=100)) == 20
        assert ids(name="nomatch-*") == [] and len(ids(name="flaky", backend="local")) == 50
        assert "1-50 of 120" in session.get(f"{ui.base}/", timeout=30).text
    finally:
        stop_ui(ui)


def _exchange(port: int, data: bytes, wait: float = 10.0) -> bytes:
    """Send ``data`` on one connection and read every byte the server answers until it closes (or ``wait`` s)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as conn:
        conn.sendall(data)
        got = b""
        with contextlib.suppress(socket.timeout, ConnectionResetError):
            while True:
                more = conn.recv(1 << 16)
                if not more:
                    break
                got += more
    return got


@pytest.mark.process
def test_a_body_is_read_whole_or_refused_and_never_read_as_the_next_request(ui: Ui) -> None:
    """The server read at most 64 KiB of an action's body, and none of a chunked one or of a request the guard
    refused: on the same connection the rest was read as the next request and answered (a request smuggled in a
    form's body, which a page of another origin can send). Now the whole body is read, or the request is refused
    in one answer (413, 411, 400) and the connection closed: one answer per connection, whatever the body holds."""
    port = int(ui.base.rsplit(":", 1)[1])
    token = ui.url.split("token=", 1)[1]
    smuggled = f"GET /sweeps HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: malaunch-ui-{port}={token}\r\n\r\n".encode()
    head = f"POST /action HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: malaunch-ui-{port}={token}\r\n"
    big = b"csrf=x&a=".ljust(1 << 16, b"a") + smuggled  # the old server read 64 KiB: the rest was a request
    cases = {
        "big": (head + f"Content-Length: {len(big)}\r\n\r\n").encode() + big,
        "chunked": (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + smuggled,
        "refused": f"POST /action HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(smuggled)}\r\n\r\n"
        .encode() + smuggled,
        "length": (head + "Content-Length: -1\r\n\r\n").encode() + smuggled,
    }  # fmt: skip
    codes = {}
    for name, data in cases.items():
        answered = re.findall(rb"HTTP/1\.1 (\d{3}) [A-Za-z ]+\r\n", _exchange(port, data))  # a body ends in no newline
        codes[name] = [int(code) for code in answered]
    assert codes == {"big": [413], "chunked": [411], "refused": [403], "length": [400]}, codes
    refused = requests.post(f"{ui.base}/action", data=b"x" * (1 << 17), timeout=30,
                            cookies={f"malaunch-ui-{port}": token})  # fmt: skip
    assert refused.status_code == 413, refused.text
    assert "the body is too large (131072 bytes, at most 65536)" in refused.text, refused.text


def test_a_body_that_never_comes_holds_no_thread_for_ever(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request that promised more body than it sent held its thread for ever (no timeout on the socket): any
    program could fill the page's server with them. The connection is dropped after the server's idle time."""
    monkeypatch.setattr(Handler, "timeout", 1.0)
    with page_server("local", LocalBackend(home=str(tmp_path)), str(tmp_path)) as server:
        port = int(server.server_address[1])
        started = time.monotonic()
        stalled = f"POST /action HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 100\r\n\r\nx"
        got = _exchange(port, stalled.encode(), wait=20.0)
        assert got == b"" and time.monotonic() - started < 10, got


def test_the_browser_is_opened_on_a_private_file_not_on_the_token(tmp_path: Path, ui_env: Dict[str, str]) -> None:
    """The browser was started with the URL and its token as an argument: any user of the machine read it in
    ``ps`` (a browser keeps its first command line for its life) and had the page, as the token is all that guards
    it on the loopback. As Jupyter does, the browser is given a file of the user's own (mode 0600) that sends it
    on to the URL; the file is gone once the page stops."""
    argv_file = tmp_path / "browser-argv"
    browser = tmp_path / "browser"
    browser.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {argv_file}\n")
    browser.chmod(0o755)
    proc = subprocess.Popen([os.path.join(VENV_BIN, "ma-submit"), "ui", "--port", "0"], env={**ui_env,
                            "BROWSER": str(browser), "DISPLAY": ""}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    ui = None
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        ui = Ui(proc, first.split(" at ", 1)[1].split()[0], "", [first])
        wait_for(lambda: argv_file.exists() and argv_file.read_text().strip() != "", what="the browser is started")
        token = ui.url.split("token=", 1)[1]
        (given,) = argv_file.read_text().split()
        assert token not in given and given.startswith("file://"), given
        opened = Path(given[len("file://"):])
        assert opened.stat().st_mode & 0o777 == 0o600 and opened.parent.stat().st_mode & 0o077 == 0
        assert ui.url in opened.read_text()
    finally:
        if ui is not None:
            stop_ui(ui)
        else:
            proc.kill()
            proc.wait()
    assert not opened.exists()
