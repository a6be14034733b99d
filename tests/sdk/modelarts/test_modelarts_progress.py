"""A ModelArts job's progress and time to recover in ``status`` and ``top`` (issue 39), read from its tasks' log tails
on the fake API: task 0's log is a real shim's console (:mod:`shim_console`), read through the log link with a
suffix ``Range`` (only the tail travels), else through the preview; an unkind platform (a link that fails, a log
API that fails, a line cut at the tail) costs lines, never the status."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Tuple

import pytest
from fake_modelarts import FakeModelArts
from malaunch.entrypoint.public import RankProgress, read_progress, read_recovery
from malaunch.entrypoint.run.statuslines import progress_text
from malaunch.sdk import JobState
from malaunch.sdk.backends.logprogress import LOG_TAIL_BYTES
from malaunch.sdk.backends.modelarts.backend import ModelArtsBackend
from malaunch.sdk.cli.actions import render_status
from malaunch.sdk.progress_text import progress_line, recovery_block
from sdkutil import wait_for
from shim_console import ShimConsole, restarted_console
from test_modelarts_api import FAST, body
from test_modelarts_edges import api_env

pytestmark = pytest.mark.process

T = 1795844400.0
HOST1 = (RankProgress(2, 40, 6000, T + 20, T, "1.0", 30, T + 10, 1),)


@pytest.fixture(scope="module")
def shim_run(tmp_path_factory: pytest.TempPathFactory) -> ShimConsole:
    return restarted_console(tmp_path_factory.mktemp("shim"))


def started(fake_ma: FakeModelArts, tmp_path: Path, shim_run: ShimConsole) -> Tuple[ModelArtsBackend, str]:
    """A running job of two tasks: task 0's log is the shim's console, task 1's ends with a line cut short."""
    fake_ma.outcome = ("silent", 0)
    backend = ModelArtsBackend(environ=api_env(fake_ma, tmp_path), policy=FAST, poll=0.0, progress=None,
                               status_interval=0.0)  # fmt: skip
    job_id = backend.api.create_job(body())["metadata"]["id"]
    fake_ma.append_log(job_id, "worker-0", shim_run.console.decode())
    cut = f"[ma-entrypoint] {progress_text((HOST1[0]._replace(step=41, host=None),))}"[:-9]
    fake_ma.append_log(job_id, "worker-1", f"[rank 2] step 40\n[ma-entrypoint] {progress_text(HOST1)}\n{cut}")
    wait_for(lambda: backend.status(job_id).state is JobState.RUNNING, what="the job running")
    return backend, job_id


def test_status_reads_the_tail_of_each_tasks_log(fake_ma: FakeModelArts, tmp_path: Path,
                                                 shim_run: ShimConsole) -> None:  # fmt: skip
    backend, job_id = started(fake_ma, tmp_path, shim_run)
    status = backend.status_with_progress(job_id)
    host0 = tuple(read_progress(str(shim_run.log_dir / "progress.d"), host=0))
    assert status.progress == (*host0, *HOST1)
    recovery = read_recovery(str(shim_run.log_dir / "recovery.json"))
    assert status.recovery == tuple(recovery)
    now = time.time()
    said = progress_line([*host0, *HOST1], True, now)
    assert render_status(status, now=now).splitlines()[-6:] == [f"progress:  {said}", *recovery_block(recovery)]
    assert fake_ma.log_ranges == [f"bytes=-{LOG_TAIL_BYTES}"] * 2  # only the tails travelled, no preview
    assert fake_ma.count("GET", "/logs/preview") == 0
    assert backend.status(job_id).progress == ()  # wait's polling reads no log


def test_top_shows_each_ranks_step(fake_ma: FakeModelArts, tmp_path: Path, shim_run: ShimConsole) -> None:
    backend, job_id = started(fake_ma, tmp_path, shim_run)
    report = backend.usage(job_id)
    assert [(record.rank, record.host, record.step) for record in report.ranks] == [(0, 0, 6), (1, 0, 6), (2, 1, 40)]


def test_a_link_that_fails_falls_back_to_the_preview(fake_ma: FakeModelArts, tmp_path: Path,
                                                     shim_run: ShimConsole) -> None:  # fmt: skip
    backend, job_id = started(fake_ma, tmp_path, shim_run)
    fake_ma.faults["obs"] = ["500"]
    status = backend.status_with_progress(job_id)
    assert status.progress == (*read_progress(str(shim_run.log_dir / "progress.d"), host=0), *HOST1)
    assert fake_ma.count("GET", "/logs/preview") == 1


def test_a_log_api_that_fails_costs_that_tasks_lines_only(fake_ma: FakeModelArts, tmp_path: Path,
                                                          shim_run: ShimConsole) -> None:  # fmt: skip
    backend, job_id = started(fake_ma, tmp_path, shim_run)
    fake_ma.log_links = False
    fake_ma.faults["log"] = ["500"] * FAST.attempts  # task 0's preview, every retry
    status = backend.status_with_progress(job_id)
    assert (status.state, status.progress, status.recovery) == (JobState.RUNNING, HOST1, ())
    assert "progress:  step 40 of 6000 (1 rank of attempt 1)" in render_status(status)
