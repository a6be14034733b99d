"""A cloud job's page shows its progress and time to recover, read from its hosts' logs as ``ma-submit status``
reads them (``Backend.status_with_progress``), at most once per lifetime per job, while its state is asked on every
refresh.

Real parts: the page's own server (in this process, over HTTP with its token and cookie) over the real Volcano
backend on the loopback Kubernetes API (``kubefake``), whose pods' logs hold the shims' ``progress/v1`` and
``recovery/v1`` lines; the calls of the backend are counted. The cache's clock is the test's (no sleep)."""

from __future__ import annotations

import re
import time
from typing import Iterator, List, Tuple

import pytest
import requests
from kubefake import FakeKube, feed_console, volcano_job
from malaunch.entrypoint.public import RankProgress, Recovery
from malaunch.entrypoint.run.statuslines import progress_text, recovery_text
from malaunch.sdk import spec_from_mapping
from malaunch.sdk.backends._http import RetryPolicy
from malaunch.sdk.backends.volcano.backend import VolcanoBackend
from malaunch.sdk.progress_text import progress_line
from malaunch.sdk.status import JobStatus
from malaunch.sdk.ui.kept import CLOUD_LIFETIME, KeptReads
from malaunch.sdk.ui.server import UiServer, url_of
from sdkutil import wait_for
from uiutil import Clock, job_part, page_server

pytestmark = pytest.mark.process

FAST = RetryPolicy(attempts=2, initial=0.01, maximum=0.02, jitter=0.0)
T = 1795844400.0
#: Host 1's two ranks at steps 40 and 41 of 6000, attempt 1 (as a shim's progress line carries them).
HOST1 = (RankProgress(2, 40, 6000, T + 20, T, "1.0", 30, T + 10, 1),
         RankProgress(3, 41, 6000, T + 20.5, T, "1.0", 31, T + 10.5, 1))  # fmt: skip
RECOVERED = Recovery(0, HOST1[0].time - 9.0, HOST1[0].time - 8.5, HOST1[0].time - 7.0, HOST1[0].time - 5.0)


class CountingVolcano(VolcanoBackend):
    """The real Volcano backend; each status and each status with progress is noted."""

    def __init__(self, kubeconfig: str) -> None:
        super().__init__(kubeconfig=kubeconfig, environ={}, poll_interval=0.2, policy=FAST, progress=None)
        self.asked: List[str] = []

    def status(self, job_id: str) -> JobStatus:
        self.asked.append("status")
        return super().status(job_id)

    def status_with_progress(self, job_id: str) -> JobStatus:
        self.asked.append("with progress")
        return super().status_with_progress(job_id)


@pytest.fixture
def running(kube: FakeKube, kubeconfig: str) -> Iterator[Tuple[CountingVolcano, str]]:
    backend = CountingVolcano(str(kubeconfig))
    handle = backend.submit(spec_from_mapping(volcano_job("idle")))
    namespace, name = handle.id.split("/")

    def both_running() -> bool:
        pods = kube.cluster.pods_of(namespace, name)
        return len(pods) == 2 and all(pod.phase == "Running" for pod in pods)

    wait_for(both_running, what="both pods running")
    yield backend, handle.id
    backend.stop(handle.id)


@pytest.fixture
def page(running: Tuple[CountingVolcano, str], tmp_path: str) -> Iterator[UiServer]:
    with page_server("volcano", running[0], str(tmp_path)) as server:
        yield server


def _part(session: requests.Session, base: str, job_id: str, name: str) -> str:
    return job_part(session, base, "volcano", job_id, name)


def _progress(markup: str) -> str:
    (said,) = re.findall(r'<p class="progress">([^<]*)</p>', markup)
    return said


def test_a_volcano_jobs_page_shows_the_progress_and_recovery_its_hosts_logged(
    kube: FakeKube, running: Tuple[CountingVolcano, str], page: UiServer
) -> None:
    backend, job_id = running
    namespace, name = job_id.split("/")
    clock = Clock()
    page.app.progress = KeptReads(clock=clock)
    feed_console(kube.cluster, namespace, name, 0, f"[ma-entrypoint] {recovery_text([RECOVERED])}\n".encode())
    host1 = f"[rank 2] step 40\n[ma-entrypoint] {progress_text(HOST1)}\n"
    feed_console(kube.cluster, namespace, name, 1, host1.encode())
    session = requests.Session()
    assert session.get(url_of(page), allow_redirects=False, timeout=30).status_code == 303
    base = url_of(page).split("?", 1)[0].rstrip("/")

    said = _progress(_part(session, base, job_id, "progress"))
    expected = progress_line(HOST1, True, time.time())
    assert expected is not None and said.split(",")[0] == expected.split(",")[0], said  # step 40 of 6000 (2 ranks)
    assert said.startswith("step 40 of 6000 (2 ranks of attempt 1"), said
    timeline = _part(session, base, job_id, "timeline")
    assert '<g class="recovery" data-attempt="0"' in timeline and "recovered in 4.00 s" in timeline, timeline
    whole = session.get(f"{base}/job", params={"b": "volcano", "id": job_id}, timeout=60)
    assert whole.status_code == 200 and "step 40 of 6000" in whole.text

    # the hosts log a later step: within the lifetime the page shows what it read, its state asked every time
    later = progress_text([HOST1[0]._replace(step=44, time=HOST1[0].time + 30), HOST1[1]._replace(step=45)])
    feed_console(kube.cluster, namespace, name, 1, f"[ma-entrypoint] {later}\n".encode())
    asked = len(backend.asked)
    clock.now += CLOUD_LIFETIME / 2
    assert _progress(_part(session, base, job_id, "progress")).startswith("step 40 of 6000")
    assert backend.asked[asked:] == ["status"]
    clock.now += CLOUD_LIFETIME
    assert _progress(_part(session, base, job_id, "progress")).startswith("step 44 of 6000")
    assert backend.asked[asked + 1 :] == ["status", "with progress"]
