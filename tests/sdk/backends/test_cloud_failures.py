"""Failure classes on the cloud backends, and the follow-up commands ``ma-submit --detach`` prints.

Against the loopback fakes (``fake_modelarts``: the v2 API with signed requests; ``kubefake``: the Kubernetes
API paths the official client uses): a failed job's ``failure_class`` comes from its root-cause task's or
pod's exit code and log tail, the shim's own verdict in that log wins, and ``ma-submit status --output json``
shows it. The hints printed after ``--detach`` are run exactly as printed (no ``--backend``).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml
from fake_modelarts import FakeModelArts
from kubefake import FakeKube, submit_detached, volcano_job
from malaunch.sdk import JobState, spec_from_mapping
from malaunch.sdk.backends.modelarts.backend import ModelArtsBackend
from malaunch.sdk.backends.volcano.backend import VolcanoBackend
from malaunch.sdk.failures import failure_from_log, shim_verdict
from modelarts_env import BUCKET
from sdkutil import ma_submit

WAIT = 120.0
_HINT = re.compile(r"'(ma-submit [^']+)'")


# -- the log-based classification (pure) ------------------------------------------------------------------


def test_the_shims_verdict_in_the_log_wins_over_the_exit_code() -> None:
    verdict = "[host 1 ma-entrypoint] failure class: user_error (not retryable): the script exited with an error"
    # exit 2 alone looks like the shim rejecting its input; the shim said it was the script's own exit 2
    assert failure_from_log(2, ())["class"] == "launcher_misuse"
    found = failure_from_log(2, ["[host 1] Traceback ...", verdict, "[host 1 ma-entrypoint] exit code 2; report"])
    assert (found["class"], found["retryable"]) == ("user_error", False)
    assert shim_verdict(["[ma-entrypoint] failure class: signal (retryable): killed"]) == "signal"
    assert shim_verdict(["[ma-entrypoint] failure class: nonsense (retryable): x"]) is None


def test_a_signal_verdict_names_the_signal_of_the_exit_code() -> None:
    verdict = "[ma-entrypoint] failure class: signal (retryable): killed by SIGSEGV (139), a signal the shim ..."
    found = failure_from_log(139, [verdict, "[ma-entrypoint] exit code 139; report: /r.json"])
    assert found["class"] == "signal"
    assert found["description"].startswith("killed by SIGSEGV (139)")
    assert "137" not in found["description"]


def test_without_a_verdict_the_log_and_exit_code_decide() -> None:
    assert failure_from_log(137)["class"] == "signal"
    timeout = failure_from_log(1, ["[rank 0] Watchdog caught collective operation timeout: WorkNCCL"])
    assert (timeout["class"], timeout["retryable"]) == ("collective_timeout", True)
    assert failure_from_log(1, ["RuntimeError: boom"])["class"] == "user_error"


# -- ModelArts ----------------------------------------------------------------------------------------------


MA_DATA: Dict[str, Any] = {
    "name": "cls-demo",
    "backend": "modelarts",
    "run_method": "torchrun",
    "code_dir": f"obs://{BUCKET}/code/",
    "boot_file": "train.py",
    "image": "swr.example/team/malaunch:1",
    "resources": {"hosts": 2, "flavor": "modelarts.vm.cpu.8u"},
    "modelarts": {"obs_dir": f"obs://{BUCKET}/jobs/"},
}


def ma_spec() -> Any:
    return spec_from_mapping(MA_DATA)


@pytest.mark.parametrize(("code", "kind", "retryable"), [(137, "signal", True), (1, "user_error", False)])
def test_modelarts_failed_job_has_a_class(
    fake_ma: FakeModelArts, ma_env: Dict[str, str], code: int, kind: str, retryable: bool
) -> None:
    fake_ma.outcome, fake_ma.run_seconds = ("fail", code), 0.2
    backend = ModelArtsBackend(environ=ma_env, status_interval=0.0, poll=0.1, progress=None)
    handle = backend.submit(ma_spec())
    final = handle.wait(timeout=WAIT, poll_interval=0.1)
    assert (final.state, final.exit_code) == (JobState.FAILED, code)
    assert final.failure_class is not None
    assert (final.failure_class["class"], final.failure_class["retryable"]) == (kind, retryable)
    assert backend.status(handle.id).failure_class == final.failure_class
    assert fake_ma.count("GET", "/tasks/worker-1/logs/preview") == 1  # the failing task's log, read once
    assert fake_ma.signature_failures == [] and fake_ma.body_errors == []


def test_modelarts_success_has_no_class(fake_ma: FakeModelArts, ma_env: Dict[str, str]) -> None:
    fake_ma.run_seconds = 0.2
    backend = ModelArtsBackend(environ=ma_env, status_interval=0.0, poll=0.1, progress=None)
    final = backend.submit(ma_spec()).wait(timeout=WAIT, poll_interval=0.1)
    assert (final.state, final.failure_class) == (JobState.SUCCEEDED, None)
    assert fake_ma.count("GET", "/logs/preview") == 0


def run_hints(stderr: str, env: Dict[str, str]) -> List[Any]:
    """Run every ``'ma-submit ...'`` command quoted in ``stderr`` exactly as printed."""
    hints = _HINT.findall(stderr)
    assert hints, stderr
    return [ma_submit(shlex.split(hint)[1:], env) for hint in hints]


@pytest.mark.process
def test_modelarts_detach_hints_work_as_printed(fake_ma: FakeModelArts, ma_env: Dict[str, str], tmp_path: Path) -> None:
    fake_ma.outcome, fake_ma.run_seconds = ("fail", 137), 0.5
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(MA_DATA))
    submitted = ma_submit(["--detach", str(job)], ma_env)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    logs, status = run_hints(submitted.stderr, ma_env)
    assert logs.returncode == 0, logs.stderr
    assert "[host 1] worker-1 exiting with code 137" in logs.stdout.splitlines()
    assert status.returncode == 0 and job_id in status.stdout, status.stderr
    as_json = ma_submit(["status", "--output", "json", job_id], ma_env)
    data = json.loads(as_json.stdout)
    assert (data["state"], data["exit_code"], data["failure_class"]["class"]) == ("FAILED", 137, "signal")


# -- Volcano ------------------------------------------------------------------------------------------------


def vc_data(scenario: str) -> Dict[str, Any]:
    return volcano_job(scenario, volcano={"not_retryable_exit_codes": [7]})


@pytest.mark.parametrize(
    ("scenario", "kind", "retryable"), [("fail7", "user_error", False), ("timeout", "collective_timeout", True)]
)
def test_volcano_failed_job_has_a_class(
    kube: FakeKube, tmp_path: Path, scenario: str, kind: str, retryable: bool
) -> None:
    config = kube.kubeconfig(tmp_path / "kubeconfig")
    backend = VolcanoBackend(kubeconfig=str(config), environ={"MALAUNCH_HOME": str(tmp_path)}, poll_interval=0.2)
    handle = backend.submit(spec_from_mapping(vc_data(scenario)))
    final = handle.wait(timeout=WAIT, poll_interval=0.1)
    assert (final.state, final.exit_code) == (JobState.FAILED, 7)
    assert final.failure_class is not None
    assert (final.failure_class["class"], final.failure_class["retryable"]) == (kind, retryable)
    log_reads = [path for method, path in kube.cluster.requests if path.endswith("-worker-1/log")]
    assert log_reads  # the root-cause pod's log was read for the class
    backend.status(handle.id)
    assert [p for m, p in kube.cluster.requests if p.endswith("-worker-1/log")] == log_reads  # read once


def test_volcano_running_and_succeeded_jobs_have_no_class(kube: FakeKube, tmp_path: Path) -> None:
    config = kube.kubeconfig(tmp_path / "kubeconfig")
    backend = VolcanoBackend(kubeconfig=str(config), environ={"MALAUNCH_HOME": str(tmp_path)}, poll_interval=0.2)
    final = backend.submit(spec_from_mapping(vc_data("succeed"))).wait(timeout=WAIT, poll_interval=0.1)
    assert (final.state, final.failure_class) == (JobState.SUCCEEDED, None)


@pytest.mark.process
def test_volcano_detach_hints_work_as_printed(kube: FakeKube, cli_env: Dict[str, str], tmp_path: Path) -> None:
    env, submitted = submit_detached(kube, cli_env, tmp_path, vc_data("timeout"))
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    logs, status = run_hints(submitted.stderr, env)
    assert logs.returncode == 0, logs.stderr
    assert "[host 1 rank 1] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(...)" in logs.stdout
    assert status.returncode == 0 and f"id:        {job_id}" in status.stdout, status.stderr
    as_json = ma_submit(["status", "--output", "json", job_id], env)
    data = json.loads(as_json.stdout)
    assert (data["state"], data["exit_code"]) == ("FAILED", 7)
    assert (data["failure_class"]["class"], data["failure_class"]["retryable"]) == ("collective_timeout", True)
    # an id typed by hand finds the cluster too, even when this machine has no record of it
    (tmp_path / "home-elsewhere").mkdir()
    other = ma_submit(["status", job_id], {**env, "MALAUNCH_HOME": str(tmp_path / "home-elsewhere")})
    assert other.returncode == 0 and f"id:        {job_id}" in other.stdout, other.stderr
