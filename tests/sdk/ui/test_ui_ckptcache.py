"""The job page lists a job's checkpoints at most once per lifetime (issue 44 item 3): the progress part refreshes
every 2 s while a page is open, and a large folder (or OBS) was listed on every refresh.

Real parts: the page's own server (in this process, over HTTP with its token and cookie) over a real local backend
whose listing calls are counted, and real local jobs that save checkpoints with ``checkpoint.save``. The cache's
clock is the test's, so the lifetime passes when the test says so (no sleep)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
import requests
from malaunch.sdk.backends.checkpoints import CheckpointListing
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.ui.kept import LOCAL_LIFETIME, KeptReads
from malaunch.sdk.ui.server import UiServer, url_of
from sdkutil import job_ids, ma_submit, wait_for, write_job
from uiutil import Clock, page_server

pytestmark = pytest.mark.process

#: Saves checkpoint STEP, then (with HOLD set) waits for HOLD and saves STEP + 2, then waits for HOLD + ".end".
TRAIN = """
    import os, time
    from malaunch.entrypoint import checkpoint

    def save(step):
        with checkpoint.save(step) as folder:
            open(os.path.join(folder, "weights"), "w").write("x" * 100)

    def wait(path):
        while not os.path.exists(path):
            time.sleep(0.05)

    step = int(os.environ["STEP"])
    save(step)
    hold = os.environ.get("HOLD")
    if hold:
        wait(hold)
        save(step + 2)
        wait(hold + ".end")
"""


class CountingLocal(LocalBackend):
    """The real local backend; each listing of a job's checkpoints is noted."""

    def __init__(self, home: str) -> None:
        super().__init__(home=home)
        self.listed: List[str] = []

    def checkpoints(self, job_id: str) -> CheckpointListing:
        self.listed.append(job_id)
        return super().checkpoints(job_id)


@pytest.fixture
def page(home: Path) -> Iterator[UiServer]:
    with page_server("local", CountingLocal(str(home)), str(home)) as server:
        yield server


def _submit(tmp_path: Path, env: Dict[str, str], name: str, **extra: str) -> str:
    before = set(job_ids(Path(env["MALAUNCH_HOME"])))
    job = write_job(tmp_path / name, TRAIN, name=name, checkpoint={"keep": 5}, env=extra)
    assert ma_submit(["--detach", str(job)], env).returncode == 0
    (job_id,) = set(job_ids(Path(env["MALAUNCH_HOME"]))) - before
    return job_id


def _rows(session: requests.Session, base: str, job_id: str) -> List[str]:
    answer = session.get(f"{base}/part", params={"name": "progress", "b": "local", "id": job_id}, timeout=60)
    assert answer.status_code == 200, answer.text
    return re.findall(r'<tr class="checkpoint" data-state="[^"]+"><td>([^<]*)</td>', answer.text)


@pytest.mark.usefixtures("cleanup_jobs")
def test_refreshes_within_the_lifetime_list_once_and_a_new_checkpoint_shows_after_it(
    tmp_path: Path, cli_env: Dict[str, str], page: UiServer
) -> None:
    home = Path(cli_env["MALAUNCH_HOME"])
    backend = page.app.backend("local")
    assert isinstance(backend, CountingLocal)
    clock = Clock()
    page.app.checkpoints = KeptReads(clock=clock)
    hold = tmp_path / "hold"
    running = _submit(tmp_path, cli_env, "saves", STEP="2", HOLD=str(hold))
    other = _submit(tmp_path, cli_env, "other", STEP="7")
    try:
        folder = home / "jobs" / running / "checkpoints"
        wait_for(lambda: (folder / "step-00000002" / ".complete").exists(), 120, "the first checkpoint")
        assert ma_submit(["wait", other], cli_env).returncode == 0
        session = requests.Session()
        assert session.get(url_of(page), allow_redirects=False, timeout=30).status_code == 303
        base = url_of(page).split("?", 1)[0].rstrip("/")
        assert _rows(session, base, running) == ["step-00000002"]
        hold.write_text("")
        wait_for(lambda: (folder / "step-00000004" / ".complete").exists(), 120, "the second checkpoint")
        clock.now += LOCAL_LIFETIME / 2
        assert _rows(session, base, running) == ["step-00000002"]  # within the lifetime: as listed before
        assert _rows(session, base, other) == ["step-00000007"]  # another job: its own rows, never the first's
        assert backend.listed == [running, other]
        clock.now += LOCAL_LIFETIME
        assert _rows(session, base, running) == ["step-00000002", "step-00000004"]  # the lifetime passed
        assert _rows(session, base, running) == ["step-00000002", "step-00000004"]
        assert backend.listed == [running, other, running]
    finally:
        Path(str(hold) + ".end").write_text("")
    assert ma_submit(["wait", running], cli_env).returncode == 0
    assert _rows(session, base, running) == ["step-00000002", "step-00000004"]  # it ended: listed again at once
    assert backend.listed == [running, other, running, running]
