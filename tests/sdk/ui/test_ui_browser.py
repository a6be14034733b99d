"""``ma-submit ui`` in a real browser (Debian's headless Chromium through Selenium): a real local job that fails,
restarts and succeeds, seen on its page (its log followed live, a ``<script>`` line shown as text, the attempts
drawn); a running job stopped and an ended one deleted from the page; a sweep's results and plot; and a broken
cloud profile whose error shows in place while the local jobs still list.

With ``MALAUNCH_UI_SCREENSHOTS=1`` these tests write the screenshots of docs/ui.md (see :mod:`uiutil`).
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import textwrap
from pathlib import Path
from typing import Any, Dict, List

import pytest
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.status import JobState
from malaunch.sdk.ui.opening import open_file
from sdkutil import VENV_BIN, assert_nothing_running, job_ids, ma_submit, wait_for, write_job
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait
from uiutil import Ui, screenshot, start_ui, stop_ui

WAIT = 60.0

#: Attempt 0 fails (exit 3) after a line holding markup; attempt 1 writes that line again, then waits for the
#: test's word in the file GO (its own condition, polled) and writes it: a line written while the page is open.
FLAKY = """
    import os, pathlib, sys, time
    attempt, rank = int(os.environ["MALAUNCH_ATTEMPT"]), os.environ.get("RANK", os.environ.get("RANK_ID", "?"))
    print(f"rank {rank} attempt {attempt} <script>alert('x')</script>", flush=True)
    if attempt == 0 and rank == "0":  # after its line: the job's one failure, so no teardown can cut the line
        sys.exit(3)
    while attempt == 0:  # rank 1 waits for the teardown that rank 0's failure brings
        time.sleep(0.05)
    go = pathlib.Path(GO)
    while not go.exists():
        time.sleep(0.05)
    print(f"rank {rank} live {go.read_text()}", flush=True)
"""
SLEEPER = "import time\nprint('up', flush=True)\ntime.sleep(600)\n"


def _log_text(driver: Any) -> str:
    return str(driver.find_element(By.ID, "log").text)


def _until(driver: Any, condition: Any, what: str) -> Any:
    """Wait for ``condition``; the parts the page refreshes are replaced while we look (stale elements)."""
    waiting = WebDriverWait(driver, WAIT, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,))
    try:
        return waiting.until(condition, what)
    except TimeoutException:  # say what the page showed instead
        shown = driver.execute_script("const l = document.getElementById('log'); return l ? l.innerText : null")
        drawn = _outcomes(driver)
        raise TimeoutException(f"{what}; the page's log showed: {shown!r}; attempts drawn: {drawn}") from None


def _open_job(driver: Any, ui: Ui, job_id: str) -> None:
    driver.get(ui.url)  # the URL with the token: the page answers with a cookie and the jobs list
    _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'tr[data-id="{job_id}"] a'), f"the row of {job_id}")
    driver.find_element(By.CSS_SELECTOR, f'tr[data-id="{job_id}"] a').click()
    _until(driver, lambda d: d.find_element(By.TAG_NAME, "h1").text == job_id, "the job's page")


def _outcomes(driver: Any) -> List[str]:
    """The attempts drawn, read in one go (the part may be refreshed meanwhile)."""
    found: List[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll('#timeline g.attempt')).map(g => g.dataset.outcome)"
    )
    return found


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_job_that_fails_restarts_and_succeeds_shows_live_logs_and_its_attempts(
    tmp_path: Path, ui_env: Dict[str, str], ui: Ui, browser: Any
) -> None:
    go = tmp_path / "go"
    script = f"GO = {str(go)!r}\n" + textwrap.dedent(FLAKY)
    job = write_job(tmp_path / "flaky", script, name="flaky", resources={"hosts": 2},
                    launcher={"max_restarts": 2, "restart_on": "always"})  # fmt: skip
    done = ma_submit(["--detach", str(job)], ui_env)
    assert done.returncode == 0, done.stderr
    (job_id,) = job_ids(Path(ui_env["MALAUNCH_HOME"]))
    try:
        console = Path(ui_env["MALAUNCH_HOME"]) / "jobs" / job_id / "hosts" / "0" / "console.log"
        wait_for(lambda: console.is_file() and "attempt 1 <script>" in console.read_text(errors="replace"), WAIT,
                 "attempt 1 to start")  # fmt: skip

        _open_job(browser, ui, job_id)
        assert Select(browser.find_element(By.ID, "logfile")).first_selected_option.text == "hosts/0/console.log"
        shown = "attempt 0 <script>alert('x')</script>"
        _until(browser, lambda d: shown in _log_text(d), "the <script> line, as text")
        assert browser.find_elements(By.CSS_SELECTOR, "#log script, #log *:not(div)") == []
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018 (reading it is the check)
        _until(browser, lambda d: "restarted" in _outcomes(d), "attempt 0 drawn as restarted")
        assert _outcomes(browser) == ["restarted", "running"]
        screenshot(browser, "ui-job-running", tmp_path)

        word = secrets.token_hex(4)
        go.write_text(word)  # the ranks write their line now, while the page follows host 0's log
        _until(browser, lambda d: f"live {word}" in _log_text(d), "the line written while the page was open")
        search = browser.find_element(By.ID, "logsearch")
        search.send_keys("live")
        _until(browser, lambda d: _log_text(d).splitlines() and all("live" in x for x in _log_text(d).splitlines()),
               "only the lines holding the search")  # fmt: skip
        Select(browser.find_element(By.ID, "logfile")).select_by_visible_text("hosts/1/console.log")
        _until(browser, lambda d: f"live {word}" in _log_text(d) and "[rank 1]" in _log_text(d), "host 1's line")

        _until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#summary [data-ended]"), "the page to see the end")
        browser.refresh()
        _until(browser, lambda d: _outcomes(d) == ["restarted", "succeeded"], "both attempts drawn")
        cause = _until(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#timeline tr.attempt-row").text, "the table")
        assert "exited with 3" in cause and "root cause rank" in cause, cause  # the failure texts since the merge
        assert "SUCCEEDED" in browser.find_element(By.ID, "summary").text
        screenshot(browser, "ui-job", tmp_path)
        browser.get(f"{ui.base}/")
        row = browser.find_element(By.CSS_SELECTOR, f'tr[data-id="{job_id}"]').text
        assert row.split()[1:] == ["SUCCEEDED", "local", "flaky", row.split()[4], "2", row.split()[6], "0"], row
        screenshot(browser, "ui-jobs", tmp_path)
    finally:  # a failed assertion stops the job it started here (cleanup_jobs then proves nothing runs)
        backend = LocalBackend(home=ui_env["MALAUNCH_HOME"])
        if not backend.status(job_id).is_terminal:
            backend.stop(job_id)


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_stop_and_delete_from_the_page_behind_a_confirmation(
    tmp_path: Path, ui_env: Dict[str, str], ui: Ui, browser: Any
) -> None:
    job = write_job(tmp_path / "sleeper", SLEEPER, name="sleeper")
    assert ma_submit(["--detach", str(job)], ui_env).returncode == 0
    home = Path(ui_env["MALAUNCH_HOME"])
    (job_id,) = job_ids(home)
    backend = LocalBackend(home=str(home))
    wait_for(lambda: backend.status(job_id).state is JobState.RUNNING, WAIT, "the job to run")

    _open_job(browser, ui, job_id)
    assert browser.find_elements(By.ID, "delete") == []  # a running job is stopped first
    browser.find_element(By.ID, "stop").click()
    assert "Stop" in browser.find_element(By.TAG_NAME, "h1").text
    assert backend.status(job_id).state is JobState.RUNNING  # the question changed nothing
    browser.find_element(By.ID, "confirm").click()
    _until(browser, lambda d: d.find_elements(By.ID, "said"), "the action's answer")
    assert browser.find_element(By.ID, "said").text == f"job {job_id} STOPPED"  # what 'ma-submit stop' prints
    assert backend.status(job_id).state is JobState.STOPPED
    assert_nothing_running(job_id)

    _open_job(browser, ui, job_id)
    browser.find_element(By.ID, "delete").click()
    browser.find_element(By.ID, "confirm").click()
    _until(browser, lambda d: d.find_elements(By.ID, "said"), "the action's answer")
    assert browser.find_element(By.ID, "said").text == f"deleted {job_id}"
    assert job_ids(home) == []


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_broken_cloud_profile_shows_its_error_in_place_and_local_jobs_still_show(
    tmp_path: Path, ui_env: Dict[str, str], browser: Any
) -> None:
    with socket.socket() as closed:  # a port nothing listens on once this block ends
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    configured = subprocess.run(
        [os.path.join(VENV_BIN, "ma-submit"), "configure", "--profile", "broken", "--backend", "modelarts", "--region",
         "cn-north-4", "--project-id", "p1", "--ak", "AK", "--endpoint", f"http://127.0.0.1:{port}", "--sk-stdin"],
        env=ui_env, input="SK\n", capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert configured.returncode == 0, configured.stderr
    job = write_job(tmp_path / "trial", "import sys\nx = float(sys.argv[1])\nprint(f'loss={(x - 2) ** 2 + 0.5}')\n",
                    name="trial", args=["{x}"])  # fmt: skip
    swept = ma_submit(["sweep", "run", str(job), "--param", "x=0,1,2,3", "--metric", "loss", "--metric-regex",
                       r"loss=([0-9.]+)", "--goal", "minimize", "--max-parallel", "2"], ui_env)  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    ui = start_ui(ui_env, "--profile", "broken")
    try:
        browser.get(ui.url)
        error = browser.find_element(By.CSS_SELECTOR, '.error[data-backend="modelarts"]').text
        assert error.startswith("modelarts: ") and f"127.0.0.1:{port}" in error and "refused" in error, error
        rows = browser.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr")
        assert len(rows) == 4 and all(" local trial " in f" {row.text} " for row in rows)
        screenshot(browser, "ui-broken-cloud", tmp_path)
        browser.find_element(By.LINK_TEXT, "Sweeps").click()
        browser.find_element(By.CSS_SELECTOR, "table.sweeps a").click()
        ranked = [row.text.split()[:2] for row in browser.find_elements(By.CSS_SELECTOR, "table.results tbody tr")]
        assert ranked[0] == ["1", "2"], ranked  # trial 2 (x=2) has the smallest loss
        assert len(browser.find_elements(By.CSS_SELECTOR, "svg g.trial")) == 4
        assert len(browser.find_elements(By.CSS_SELECTOR, "svg circle.best")) == 1
        screenshot(browser, "ui-sweep", tmp_path)
    finally:
        stop_ui(ui)


def test_the_file_the_browser_is_opened_on_leads_to_the_jobs_page(tmp_path: Path, ui: Ui, browser: Any) -> None:
    """The file ``ma-submit ui`` gives the browser in place of the URL (:mod:`malaunch.sdk.ui.opening`) leads a
    real browser to the jobs page, signed in by the cookie, and leaves no token in its address bar."""
    path = open_file(str(tmp_path), int(ui.base.rsplit(":", 1)[1]), ui.url)
    browser.get(f"file://{path}")
    _until(browser, lambda d: d.current_url == f"{ui.base}/", "the jobs page, without the token")
    assert browser.find_element(By.CSS_SELECTOR, "nav .brand").text == "malaunch"
