"""A Volcano job's progress and time to recover in ``status`` and ``top`` (issue 39), read from its pods' log tails on
the loopback Kubernetes API (``kubefake``): host 0's log is a real shim's console (:mod:`shim_console`), and what
``status`` shows of it is what that shim's record files say, in the words a local job's status uses. Unkind logs:
a rank that prints the tag, a line cut at the tail, a window cut by ``limitBytes``, a log the API refuses."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest
from kubefake import FakeKube, feed_console
from malaunch.entrypoint.public import RankProgress, read_progress, read_recovery
from malaunch.entrypoint.run.statuslines import progress_text
from malaunch.sdk import JobState, spec_from_mapping
from malaunch.sdk.backends._http import RetryPolicy
from malaunch.sdk.backends.logprogress import LOG_TAIL_BYTES, LOG_TAIL_LINES
from malaunch.sdk.backends.volcano.backend import VolcanoBackend
from malaunch.sdk.cli.actions import render_status
from malaunch.sdk.cli.inside import render_usage
from malaunch.sdk.progress_text import progress_line, recovery_block
from sdkutil import wait_for
from shim_console import ShimConsole, restarted_console
from test_volcano_backend import job_data

pytestmark = pytest.mark.process

FAST = RetryPolicy(attempts=2, initial=0.01, maximum=0.02, jitter=0.0)
T = 1795844400.0
HOST1 = (RankProgress(2, 40, 6000, T + 20, T, "1.0", 30, T + 10, 1), RankProgress(3, 41, 6000, T + 20.5, T, "1.0",
         31, T + 10.5, 1))  # fmt: skip


@pytest.fixture(scope="module")
def shim_run(tmp_path_factory: pytest.TempPathFactory) -> ShimConsole:
    return restarted_console(tmp_path_factory.mktemp("shim"))


@pytest.fixture
def running(kube: FakeKube, kubeconfig: Path) -> Iterator[Tuple[VolcanoBackend, str, str]]:
    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2, policy=FAST, progress=None)
    handle = backend.submit(spec_from_mapping(job_data("idle")))
    wait_for(lambda: all(pod.phase == "Running" for pod in kube.cluster.pods_of(*handle.id.split("/")))
             and len(kube.cluster.pods_of(*handle.id.split("/"))) == 2, what="both pods running")  # fmt: skip
    namespace, name = handle.id.split("/")
    yield backend, namespace, name
    backend.stop(handle.id)


def host1_log(cut: bool = True) -> bytes:
    good = f"[ma-entrypoint] {progress_text(HOST1)}\n"
    fake = f"[rank 3] [ma-entrypoint] {progress_text((HOST1[1]._replace(step=999, host=None),))}\n"
    tail = f"[ma-entrypoint] {progress_text((HOST1[0]._replace(step=45),))}"[:-12] if cut else ""
    return f"[rank 2] step 40\n{good}[rank 3] step 41\n{fake}{tail}".encode()


def files_status_lines(shim_run: ShimConsole, status_progress: Tuple[RankProgress, ...], now: float) -> List[str]:
    """What a local job's status says of the shim's record files (host 0) and host 1's records."""
    records = [*read_progress(str(shim_run.log_dir / "progress.d"), host=0), *status_progress]
    said = progress_line(records, True, now)
    assert said is not None
    return [f"progress:  {said}", *recovery_block(read_recovery(str(shim_run.log_dir / "recovery.json")))]


def test_status_shows_the_progress_and_recovery_the_shims_wrote_in_their_logs(
    kube: FakeKube, running: Tuple[VolcanoBackend, str, str], shim_run: ShimConsole
) -> None:
    backend, namespace, name = running
    feed_console(kube.cluster, namespace, name, 0, shim_run.console)
    feed_console(kube.cluster, namespace, name, 1, host1_log())
    status = backend.status_with_progress(f"{namespace}/{name}")
    assert status.state is JobState.RUNNING
    host0 = tuple(read_progress(str(shim_run.log_dir / "progress.d"), host=0))
    assert status.progress == (*host0, *HOST1)  # the cut line and the rank's imitation were passed over
    assert status.recovery == tuple(read_recovery(str(shim_run.log_dir / "recovery.json")))
    now = time.time()
    assert render_status(status, now=now).splitlines()[-6:] == files_status_lines(shim_run, HOST1, now)
    reads = [query for query in kube.cluster.log_queries if query.get("follow") != "true"]
    assert reads and all(query.get("tailLines") == str(LOG_TAIL_LINES) for query in reads)
    assert all(query.get("limitBytes") == str(LOG_TAIL_BYTES) for query in reads)
    assert backend.status(f"{namespace}/{name}").progress == ()  # wait's polling reads no log
    assert backend.handle(f"{namespace}/{name}").status_with_progress().progress == status.progress


def test_top_shows_each_ranks_step_from_the_logs(
    kube: FakeKube, running: Tuple[VolcanoBackend, str, str], shim_run: ShimConsole
) -> None:
    backend, namespace, name = running
    feed_console(kube.cluster, namespace, name, 0, shim_run.console)
    feed_console(kube.cluster, namespace, name, 1, host1_log())
    report = backend.usage(f"{namespace}/{name}")
    assert [(record.rank, record.host, record.step) for record in report.ranks] == [(0, 0, 6), (1, 0, 6), (2, 1, 40),
                                                                                  (3, 1, 41)]  # fmt: skip
    assert "RANK  HOST  STEP" in render_usage(report)


def test_a_window_cut_by_limit_bytes_still_has_the_older_lines(
    kube: FakeKube, running: Tuple[VolcanoBackend, str, str], shim_run: ShimConsole
) -> None:
    backend, namespace, name = running
    feed_console(kube.cluster, namespace, name, 0, shim_run.console)
    chatter = b"".join(b"[rank 0] " + b"x" * 2000 + b"\n" for _ in range(LOG_TAIL_BYTES // 2000 + 50))
    feed_console(kube.cluster, namespace, name, 0, chatter)  # the API server stops in the middle of a line
    status = backend.status_with_progress(f"{namespace}/{name}")
    assert status.progress == tuple(read_progress(str(shim_run.log_dir / "progress.d"), host=0))
    assert status.recovery and status.recovery[0].first_progress is not None


def test_a_log_the_api_refuses_costs_its_hosts_lines_not_the_status(
    kube: FakeKube, running: Tuple[VolcanoBackend, str, str], shim_run: ShimConsole
) -> None:
    backend, namespace, name = running
    feed_console(kube.cluster, namespace, name, 0, shim_run.console)
    feed_console(kube.cluster, namespace, name, 1, host1_log(cut=False))
    kube.cluster.faults["log"] = ["403"]  # host 0's log, read first
    status = backend.status_with_progress(f"{namespace}/{name}")
    assert (status.state, status.progress, status.recovery) == (JobState.RUNNING, HOST1, ())
    kube.cluster.faults["log"] = ["500", "500", "500"]  # a flaky API server, past the retries
    status = backend.status_with_progress(f"{namespace}/{name}")
    assert status.state is JobState.RUNNING and status.progress == HOST1
    assert "progress:  step 40 of 6000 (2 ranks of attempt 1; the fastest at 41)" in render_status(status)


def test_a_log_without_such_lines_shows_no_progress(kube: FakeKube, running: Tuple[VolcanoBackend, str, str]) -> None:
    backend, namespace, name = running
    feed_console(kube.cluster, namespace, name, 1, b"[ma-entrypoint] progress/v1 {\"ranks\":[[0,1,\n")
    status = backend.status_with_progress(f"{namespace}/{name}")
    assert (status.progress, status.recovery) == ((), ())
    assert "progress" not in render_status(status)
