"""Fixtures for the SDK tests: an isolated MALAUNCH_HOME, the environment for ``ma-submit`` subprocesses, and
a final check that no job of the test is left running."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterator, List

import pytest
from kubefake import FakeKube
from malaunch.entrypoint.run.procs import proctree
from malaunch.sdk.backends.local.jobdir import JOB_ID_VARIABLE, job_processes
from modelarts_env import fake_ma, ma_env, moto_no_put, moto_s3, moto_server, s3  # noqa: F401 - ModelArts fixtures
from sdkutil import assert_nothing_running, cli_environ, job_ids


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An isolated MALAUNCH_HOME."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def cli_env(home: Path) -> Dict[str, str]:
    """Environment for ``ma-submit`` subprocesses: isolated home, the venv first on PATH."""
    return cli_environ(home)


@pytest.fixture
def cleanup_jobs(home: Path) -> Iterator[None]:
    """After the test, stop anything a failed assertion may have left and prove nothing runs."""
    yield
    from malaunch.sdk.backends.local.backend import LocalBackend
    from malaunch.sdk.backends.local.queue.store import QueueStore

    backend = LocalBackend(home=str(home))
    failures: List[str] = []
    for entry in QueueStore(str(home)).entries():  # the waiting first: a running job stopped frees room the queue
        backend.stop(entry.job_id)  # would give to one of them, which would then outlive the test
    live = proctree.env_values(JOB_ID_VARIABLE)  # one look at every process, not one per job (a home may hold 10,000)
    for job_id in job_ids(home):
        if job_id in live and job_processes(job_id):
            backend.stop(job_id)
            failures.append(job_id)
        assert_nothing_running(job_id, processes=job_id in live)
    assert not failures, f"jobs were still running at the end of the test: {failures}"


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    """The loopback Kubernetes API with Volcano; the test fails if it saw a request the real one would refuse."""
    server = FakeKube(tick=0.3)
    yield server
    server.close()
    assert server.cluster.problems == [], "the API server saw requests it would refuse"


@pytest.fixture
def kubeconfig(kube: FakeKube, tmp_path: Path) -> Path:
    """A kubeconfig file for :func:`kube`."""
    return kube.kubeconfig(tmp_path / "kubeconfig")
