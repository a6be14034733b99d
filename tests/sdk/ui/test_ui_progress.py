"""The job page's progress, checkpoints and time to recover (issue 40, item 2), over HTTP from the real server.

A real local job (one host, the fan-out) reports its steps with ``checkpoint.progress``, saves a checkpoint every
2 steps with ``checkpoint.save``, its rank SIGKILLs itself in attempt 0 after step 3, and attempt 1 resumes from
step 2, finishes, leaves a folder named with markup beside its checkpoints, and waits for a file before it ends:
the page shows, while it runs and once it ended, the progress line ``ma-submit status`` prints, the checkpoint
rows ``ma-submit checkpoints`` lists (the markup as text), and the recovery after attempt 0 drawn in the timeline
with the record's words; a browser sees them on the ended job's page (the screenshot of docs/ui.md). The pure
parts: a recovery that has not progressed yet is drawn open, and a backend that
refuses the listing shows its line in place.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any, Dict

import pytest
import requests
from malaunch.entrypoint.public import Recovery, recovery_lines
from malaunch.sdk.backends.volcano.checkpoint import listing_refused
from malaunch.sdk.status import JobState, JobStatus
from malaunch.sdk.ui.pages import progress_part, timeline_part
from malaunch.sdk.ui.timeline import timeline_of
from sdkutil import job_ids, ma_submit, wait_for, write_job
from uiutil import Ui, job_part, screenshot

#: Steps 1..6 of 6, a checkpoint every 2; the rank kills itself after step 3 of attempt 0; attempt 1 resumes.
TRAIN = """
    import json, os, signal, sys, time
    from malaunch.entrypoint import checkpoint

    attempt = int(os.environ["MALAUNCH_ATTEMPT"])
    found = checkpoint.latest()
    start = found.step if found is not None else 0
    for step in range(start + 1, 7):
        time.sleep(0.1)
        checkpoint.progress(step, 6)
        if step % 2 == 0:
            with checkpoint.save(step) as folder:
                with open(os.path.join(folder, "rank-0.json"), "w") as out:
                    out.write(json.dumps({"step": step, "weights": "x" * 1000}))
        if attempt == 0 and step == 3:
            os.kill(os.getpid(), signal.SIGKILL)
    os.makedirs(os.path.join(checkpoint.directory(), "<script>alert(1)"), exist_ok=True)
    hold = os.environ["HOLD_FILE"]
    while not os.path.exists(hold):
        time.sleep(0.05)
"""

STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ"


def _session(ui: Ui) -> requests.Session:
    session = requests.Session()
    assert session.get(ui.url, allow_redirects=False, timeout=30).status_code == 303
    return session


def _part(session: requests.Session, ui: Ui, job_id: str, name: str) -> str:
    return job_part(session, ui.base, "local", job_id, name)


def _text(markup: str) -> str:
    """The text a browser shows of ``markup`` (tags out, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def _check_checkpoints(page: str, unmarked: str) -> None:
    rows = re.findall(r'<tr class="checkpoint" data-state="([^"]+)">(.*?)</tr>', page)
    cells = [(state, re.findall(r"<td>(.*?)</td>", row)) for state, row in rows]
    named = {cell[0]: (state, cell) for state, cell in cells}
    for step in (2, 4, 6):
        state, cell = named[f"step-{step:08d}"]
        assert state == "complete" and cell[1] == str(step) and cell[4] == "complete", cell
        assert re.fullmatch(STAMP, cell[2]) and re.fullmatch(r"\d+\.\d KB", cell[3]), cell
    state, cell = named["&lt;script&gt;alert(1)"]  # the folder's name as text, never a tag
    assert state == unmarked and cell[1] == "-" and cell[3] == "0 B", cell
    assert cell[4].startswith(f"{unmarked}: it has no .complete"), cell
    assert "<script>alert" not in page


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_the_job_page_shows_progress_checkpoints_and_the_time_to_recover(tmp_path: Path, ui_env: Dict[str, str],
                                                                          ui: Ui) -> None:  # fmt: skip
    hold = tmp_path / "hold"
    job_id = _submit(tmp_path, ui_env, hold)
    try:
        _running_and_ended(ui, ui_env, job_id, hold)
    finally:
        hold.write_text("")


def _submit(tmp_path: Path, ui_env: Dict[str, str], hold: Path) -> str:
    job = write_job(tmp_path / "job", TRAIN, name="ckpt-page", checkpoint={"keep": 3},
                    launcher={"max_restarts": 1, "grace_period": 3},
                    env={"HOLD_FILE": str(hold), "MALAUNCH_RESTART_BACKOFF": "0.2"})  # fmt: skip
    assert ma_submit(["--detach", str(job)], ui_env).returncode == 0
    (job_id,) = job_ids(Path(ui_env["MALAUNCH_HOME"]))
    return job_id


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_browser_sees_the_progress_the_checkpoints_and_the_recovery(tmp_path: Path, ui_env: Dict[str, str],
                                                                      ui: Ui, browser: Any) -> None:  # fmt: skip
    from selenium.webdriver.common.by import By

    hold = tmp_path / "hold"
    hold.write_text("")  # the job ends once attempt 1 is done
    job_id = _submit(tmp_path, ui_env, hold)
    assert ma_submit(["wait", job_id], ui_env).returncode == 0
    browser.get(ui.url)  # the token once, then the cookie
    browser.get(f"{ui.base}/job?b=local&id={job_id}")
    line = browser.find_element(By.CSS_SELECTOR, "#progress p.progress").text
    assert re.fullmatch(r"step 6 of 6 \(1 rank of attempt 1\), the last recorded \d+ s ago", line), line
    names = [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, "#progress tr.checkpoint td:first-child")]
    assert names == ["<script>alert(1)", "step-00000002", "step-00000004", "step-00000006"], names
    assert browser.find_elements(By.CSS_SELECTOR, "#progress script") == []
    bar = browser.find_element(By.CSS_SELECTOR, '#timeline g.recovery[data-attempt="0"][data-done="1"]')
    assert re.fullmatch(r"recovered in \d+\.\d\d s", bar.find_element(By.TAG_NAME, "text").text)
    title = browser.find_element(By.CSS_SELECTOR, '#timeline g.recovery > title').get_attribute("textContent")
    assert title.startswith("recovery after attempt 0: attempt 0 failure seen: ") and "None" not in title, title
    screenshot(browser, "ui-job-progress", tmp_path)


def _running_and_ended(ui: Ui, ui_env: Dict[str, str], job_id: str, hold: Path) -> None:
    home = Path(ui_env["MALAUNCH_HOME"])
    session = _session(ui)
    folder = home / "jobs" / job_id / "checkpoints"
    wait_for(lambda: (folder / "<script>alert(1)").is_dir(), 180, "attempt 1's last step")

    def running_line() -> bool:
        return "steps/s" in _part(session, ui, job_id, "progress")

    wait_for(running_line, 60, "the running job's progress line")
    page = session.get(f"{ui.base}/job", params={"b": "local", "id": job_id}, timeout=60).text
    assert "<h2>Progress and checkpoints</h2>" in page
    (line,) = re.findall(r'<p class="progress">(.*?)</p>', page)
    assert re.fullmatch(r"step 6 of 6 \(1 rank of attempt 1\), \d+\.\d\d steps/s, about \d+ s left, recorded \d+ s ago",
                        line), line  # fmt: skip
    _check_checkpoints(page, "being written")  # newer than every complete one while the job runs
    assert page.count("<script") == 1  # the page's own app.js only
    hold.write_text("")
    assert ma_submit(["wait", job_id], ui_env).returncode == 0
    page = session.get(f"{ui.base}/job", params={"b": "local", "id": job_id}, timeout=60).text
    (line,) = re.findall(r'<p class="progress">(.*?)</p>', page)
    assert re.fullmatch(r"step 6 of 6 \(1 rank of attempt 1\), the last recorded \d+ s ago", line), line
    _check_checkpoints(page, "no marker")
    # the recovery after attempt 0: a bar in the timeline's recovery row, its title the record's words
    status = ma_submit(["status", job_id], ui_env).stdout
    said = status[status.index("recovery after attempt 0:"):].splitlines()[1:5]
    (group,) = re.findall(r'<g class="recovery" data-attempt="0" data-done="1"><title>(.*?)</title>', page)
    words = html.unescape(group)
    assert words.startswith("recovery after attempt 0: attempt 0 failure seen: "), words
    for phase in said:  # the same times as status prints, phase by phase
        label, when = re.fullmatch(r"\s*(.+?)\s{2,}(\S+ UTC.*)", phase).groups()  # type: ignore[union-attr]
        assert f"{label}: {when}" in words, (phase, words)
    assert re.search(r"recovered in \d+\.\d\d s", _text(page)), _text(page)
    assert "None" not in words
    (item,) = re.findall(r'<ul class="recoveries"><li data-attempt="0">(.*?)</li></ul>', page)
    assert html.unescape(item) == f"{re.search(r'recovered in [0-9.]+ s', item).group(0)}; {words}"  # type: ignore[union-attr]


def _status(state: JobState, recovery: tuple[Recovery, ...] = ()) -> JobStatus:
    return JobStatus("j", "local", state, None, created_at=100.0, started_at=100.0, recovery=recovery)


def test_a_recovery_not_yet_progressed_is_drawn_open_with_its_words() -> None:
    record = Recovery(0, failure_seen=110.0, last_rank_gone=110.5, next_started=111.0)
    part = timeline_part(timeline_of(_status(JobState.RUNNING, (record,)), [], 115.0), 115.0)
    (title,) = re.findall(r'<g class="recovery" data-attempt="0" data-done="0"><title>(.*?)</title>', part)
    assert html.unescape(title) == "recovery after attempt 0: " + "; ".join(recovery_lines(record, label=False))
    assert "attempt 1 first progress: not yet: no rank of attempt 1 called progress()" in html.unescape(title)
    assert "recovering for 5.00 s" in part
    assert part.count('class="phase"') == 2  # last rank gone, attempt 1 started
    ended = Recovery(0, failure_seen=110.0, last_rank_gone=110.5, ended=True)
    part = timeline_part(timeline_of(_status(JobState.FAILED, (ended,)), [], 115.0), 115.0)
    assert "no recovery: the job ended" in part and "never: the job ended without another attempt" in part


def test_a_next_attempt_that_ended_without_progress_is_no_recovery_and_its_bar_stops() -> None:
    """Attempt 1 started and ended without a progress() call: no 'recovering for' growing with the clock."""
    record = Recovery(0, failure_seen=110.0, last_rank_gone=110.5, next_started=111.0, next_ended=130.0)
    part = timeline_part(timeline_of(_status(JobState.FAILED, (record,)), [], 200.0), 200.0)
    assert "recovering for" not in part and "no recovery: attempt 1 ended without progress" in part
    assert "attempt 1 first progress: never: attempt 1 ended without progress" in html.unescape(part)


def test_a_backend_that_refuses_the_listing_shows_its_line_in_place() -> None:
    refused = listing_refused("<j>")  # Volcano's line: the folder is on the cluster's volume
    part = progress_part(_status(JobState.RUNNING), None, str(refused), 120.0)
    (shown,) = re.findall(r'<div class="error" id="checkpoints-error">(.*?)</div>', part)
    assert html.unescape(shown) == str(refused) and "&lt;j&gt;" in shown and "<j>" not in part
    assert "no rank reported progress" in part
