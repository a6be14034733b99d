"""``ma-submit status`` says how many times the platform restarted the whole job where its API tells (issue 25
§5): Volcano's ``status.retryCount`` (the Kubernetes fake restarts a job through its RestartJob policy), ModelArts'
``status.running_records``; where nothing tells, nothing is claimed."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from kubefake import FakeKube, volcano_job
from malaunch.sdk import JobState, spec_from_mapping
from malaunch.sdk.backends.modelarts.phases import status_from_job
from malaunch.sdk.backends.volcano.backend import VolcanoBackend
from malaunch.sdk.cli.jobs import render_status

WAIT = 120.0


def test_volcano_counts_the_jobs_restarts(kube: FakeKube, kubeconfig: Path) -> None:
    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2)
    restarted = backend.submit(spec_from_mapping(volcano_job("restart")))
    plain = backend.submit(spec_from_mapping(volcano_job("succeed")))
    final = restarted.wait(timeout=WAIT, poll_interval=0.1)
    assert (final.state, final.platform_restarts) == (JobState.SUCCEEDED, 1)
    assert "restarts:  1 by the platform (the whole job)" in render_status(final).splitlines()
    assert final.to_json()["platform_restarts"] == 1
    other = plain.wait(timeout=WAIT, poll_interval=0.1)
    assert (other.state, other.platform_restarts) == (JobState.SUCCEEDED, 0)
    listed = {status.id: status.platform_restarts for status in backend.list()}
    assert listed == {restarted.id: 1, plain.id: 0}


def _job(status: Dict[str, Any]) -> Dict[str, Any]:
    return {"metadata": {"id": "3faf5c03-aaa1-4cbe-879d-24b05d997347", "name": "j"}, "status": status}


def test_modelarts_counts_running_records_after_the_first() -> None:
    records = [
        {"start_at": 1, "end_at": 2, "start_type": "init_or_rescheduled", "end_reason": "exit with 137",
         "end_recover": "job_reschedule"},
        {"start_at": 3, "end_at": 4, "start_type": "restarted", "end_reason": "exit with 1"},
        {"start_at": 5, "start_type": "restarted"},
    ]  # fmt: skip
    status = status_from_job(_job({"phase": "Running", "secondary_phase": "Running", "running_records": records}))
    assert status.platform_restarts == 2
    assert "restarts:  2 by the platform (the whole job)" in render_status(status)
    first_run = status_from_job(_job({"phase": "Running", "running_records": records[:1]}))
    assert first_run.platform_restarts == 0


def test_modelarts_without_records_claims_nothing() -> None:
    for status in ({"phase": "Running"}, {"phase": "Running", "running_records": None},
                   {"phase": "Running", "running_records": "garbage"}):  # fmt: skip
        result = status_from_job(_job(status))
        assert result.platform_restarts is None
        assert "restarts:" not in render_status(result)
        assert result.to_json()["platform_restarts"] is None
