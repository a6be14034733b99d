"""Golden ``ma-submit status`` lines of cloud jobs' progress and time to recover (issue 39): a real shim's console
(``tests/sdk/data/shim-console-restart.log``, written by ``tests/sdk/shim_console.py --write``: rank 1 killed at step
3 of attempt 0, attempt 1 to 6 of 6) is host 0's log of a Volcano job (all of it) and of a ModelArts job (up to
attempt 1's start), and what ``status`` prints of them, at a fixed clock, is compared with
``tests/sdk/golden/cloud/<case>.txt`` (``MALAUNCH_UPDATE_GOLDEN=1`` rewrites). The local status's goldens are not
touched: a local job's lines come from its record files (tests/sdk/cli/test_progress_status_text.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List

import pytest
from fake_modelarts import FakeModelArts
from kubefake import FakeKube, feed_console
from malaunch.entrypoint.public import read_status_lines
from malaunch.sdk import JobState, spec_from_mapping
from malaunch.sdk.backends.modelarts.backend import ModelArtsBackend
from malaunch.sdk.backends.volcano.backend import VolcanoBackend
from malaunch.sdk.cli.actions import render_status
from malaunch.sdk.status import JobStatus
from sdkutil import wait_for
from test_modelarts_api import FAST, body
from test_modelarts_edges import api_env

CONSOLE = Path(__file__).resolve().parents[1] / "data" / "shim-console-restart.log"
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "cloud"


def volcano_job() -> Dict[str, Any]:
    return {"name": "vc-progress", "run_method": "torchrun", "code_dir": ".", "boot_file": "train.py",
            "image": "reg.example/malaunch:0.1.0", "backend": "volcano", "resources": {"hosts": 1},
            "env": {"MALAUNCH_TEST_SCENARIO": "idle"}}  # fmt: skip


def console_lines() -> List[str]:
    return CONSOLE.read_text().splitlines(keepends=True)


def progress_part(status: JobStatus, last_record: float) -> str:
    """``status``'s text from its progress line on, 4 s after the newest record."""
    lines = render_status(status, now=last_record + 4.0).splitlines()
    return "\n".join(lines[next(i for i, line in enumerate(lines) if line.startswith("progress:")) :]) + "\n"


def assert_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("MALAUNCH_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"{name}: no golden file; MALAUNCH_UPDATE_GOLDEN=1 writes it"
    assert text == path.read_text(), f"{name}: the cloud status lines changed; MALAUNCH_UPDATE_GOLDEN=1 rewrites"


@pytest.mark.process
def test_volcano_status_of_a_job_that_recovered(kube: FakeKube, kubeconfig: Path) -> None:
    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2, progress=None)
    handle = backend.submit(spec_from_mapping(volcano_job()))
    namespace, name = handle.id.split("/")
    wait_for(lambda: handle.status().state is JobState.RUNNING, what="the job running")
    feed_console(kube.cluster, namespace, name, 0, "".join(console_lines()).encode())
    status = handle.status_with_progress()
    newest = max(record.time for record in status.progress)
    assert_golden("volcano-recovered", progress_part(status, newest))
    backend.stop(handle.id)


def test_modelarts_status_while_the_next_attempt_has_not_reported(fake_ma: FakeModelArts, tmp_path: Path) -> None:
    fake_ma.outcome = ("silent", 0)
    backend = ModelArtsBackend(environ=api_env(fake_ma, tmp_path), policy=FAST, poll=0.0, progress=None,
                               status_interval=0.0)  # fmt: skip
    job_id = backend.api.create_job(body())["metadata"]["id"]
    lines = console_lines()
    started = next(i for i, line in enumerate(lines) if line.startswith("[ma-entrypoint] attempt 1 of "))
    fake_ma.append_log(job_id, "worker-0", "".join(lines[: started + 2]))  # attempt 1 started, no record of it yet
    wait_for(lambda: backend.status(job_id).state is JobState.RUNNING, what="the job running")
    status = backend.status_with_progress(job_id)
    assert {record.attempt for record in status.progress} == {"0.0"}
    assert status.recovery[0].next_started is not None and status.recovery[0].first_progress is None
    newest = max(record.time for record in read_status_lines(lines[: started + 2]).progress)
    assert_golden("modelarts-next-attempt-waits", progress_part(status, newest))
