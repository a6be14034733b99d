"""One contract, one suite: the rules of ``Backend`` (``sdk/backends/base.py``) on every backend, tested the same way.

Each test runs on every backend of the registry and every backend of the tests (a folder beside this file with a
``harness.py``, whose one registry line is added for the test's duration): ``local`` (real processes through the
real shim), ``modelarts`` (the fake ModelArts API on 127.0.0.1, which checks every signature and body, and moto's S3
server), ``volcano`` (the loopback Kubernetes API of ``kubefake``, which checks every manifest against the CRD) and
``toy`` (``toy/``: jobs recorded in a folder). A shipped backend's harness is this module's ``_<name>`` (its fakes
live in the tests); a backend of the tests brings ``make_target`` in its own ``harness.py``. The fakes are
as unkind as the services: search and list pages are capped, a deleted or terminated job takes time to go,
and 429/5xx answers are queued into the calls the rules depend on.

The rules:

1. the id ``submit`` returns is the id the plan showed, and every verb (``status``, ``logs``, ``wait``,
   ``stop``, ``list``) takes it and gives it back;
2. a job that ended is terminal, with its exit code (0, or the failing host's own code);
3. ``stop`` is idempotent and the stopped job stays visible: ``status``, ``wait``, ``logs`` and ``list``
   after it give STOPPED and its exit code;
4. an unknown id is ``JobNotFound`` for every verb, and exit code 4 for ``ma-submit``;
5. ``list`` gives every job (120 of them, more than a page of any backend), newest first, each with the
   state ``status`` gives;
6. ``logs(follow=True)`` ends when the job ends and loses no line.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest
from fake_modelarts import FakeJob, FakeModelArts
from kubefake import FakeJob as FakeVolcanoJob
from kubefake import FakeKube
from malaunch.sdk import JobNotFound, JobSpec, JobState, spec_from_mapping
from malaunch.sdk.backends import registry
from malaunch.sdk.backends._http import RetryPolicy
from malaunch.sdk.backends.base import Backend
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.backends.local.jobdir import JobPaths, job_processes
from malaunch.sdk.backends.local.state import new_state
from malaunch.sdk.backends.modelarts.backend import ModelArtsBackend
from malaunch.sdk.backends.volcano.backend import VolcanoBackend
from malaunch.sdk.home import write_json_atomic
from modelarts_env import BUCKET
from sdkutil import ma_submit

pytestmark = pytest.mark.process

WAIT = 180.0
QUICK = RetryPolicy(attempts=8, initial=0.01, maximum=0.05, jitter=0.01, max_retry_after=0.05)
SCRIPT = """\
import os, sys, time
scenario = os.environ["MALAUNCH_TEST_SCENARIO"]
for step in range(5):
    print(f"step {step} of rank {os.environ.get('RANK_ID')}", flush=True)
if scenario == "run":
    time.sleep(600)
sys.exit(7 if scenario == "fail7" else 0)
"""


@dataclass
class Target:
    """One backend under test: the backend, how to write a job for a scenario, the CLI environment."""

    name: str
    backend: Backend
    env: Dict[str, str]
    code_dir: Path
    scenarios: Dict[str, str]  # ours ("succeed", "fail7", "run") -> the fake's word
    extra: Dict[str, Any]
    unknown: List[str]
    seed: Callable[[int], List[str]]
    unkind: Callable[[], None] = lambda: None
    submitted: List[str] = field(default_factory=list)
    cli: Callable[[List[str], Dict[str, str]], subprocess.CompletedProcess[str]] = ma_submit  # ma-submit ARGS

    def spec(self, scenario: str, name: str = "conf") -> JobSpec:
        return spec_from_mapping({
            "name": name, "code_dir": str(self.code_dir), "boot_file": "train.py",
            "image": "reg.example/malaunch:0.1.0",
            "resources": {"hosts": 2, "devices_per_host": 1, "flavor": "modelarts.vm.cpu.8u"},
            "env": {"MALAUNCH_TEST_SCENARIO": self.scenarios[scenario]}, **self.extra,
        })  # fmt: skip

    def submit(self, scenario: str, name: str = "conf") -> str:
        job_id = self.backend.submit(self.spec(scenario, name)).id
        self.submitted.append(job_id)
        return job_id


def _code(tmp_path: Path) -> Path:
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "train.py").write_text(SCRIPT)
    return folder


def _local(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> Iterator[Target]:
    backend = LocalBackend(home=str(home), environ=cli_env)

    def seed(count: int) -> List[str]:
        ids = []
        for n in range(count):
            job_id = f"seeded-{n:03d}"
            state = new_state(job_id, "seeded", 1_700_000_000.0 + n, [])
            state.update(state="SUCCEEDED", exit_code=0, ended_at=1_700_000_000.5 + n)
            paths = JobPaths(str(home), job_id)
            os.makedirs(paths.job_dir)
            write_json_atomic(paths.state_file, state)
            ids.append(job_id)
        return ids

    target = Target(
        "local", backend, cli_env, _code(tmp_path), {"succeed": "succeed", "fail7": "fail7", "run": "run"},
        {"run_method": "ranktable"}, ["conf-20260101-000000-abcdef"], seed,
    )  # fmt: skip
    yield target
    for job_id in target.submitted:
        if job_processes(job_id):
            backend.stop(job_id)
        assert job_processes(job_id) == [], f"job {job_id} left processes running"


def _modelarts(tmp_path: Path, ma_env: Dict[str, str], fake_ma: FakeModelArts, s3: Any) -> Iterator[Target]:
    backend = ModelArtsBackend(environ=ma_env, policy=QUICK, poll=0.1, status_interval=0.0, progress=None)

    def seed(count: int) -> List[str]:
        template = next(iter(fake_ma.jobs.values())).body if fake_ma.jobs else None
        assert template is not None, "seed after one real submit"
        ids = []
        for n in range(count):
            body = {**template, "metadata": {**template["metadata"], "name": f"seeded-{n:03d}"}}
            job = FakeJob(f"00000000-0000-4000-8000-{n:012d}", body, ("complete", 0), 0.0)
            job.created_ms = 1_700_000_000_000 + n * 1000
            job.created -= 10.0  # long finished
            with fake_ma.lock:
                fake_ma.jobs[job.id] = job
            ids.append(f"seeded-{n:03d}")
        return ids

    def unkind() -> None:
        fake_ma.faults.update(get=["429", "500"], search=["500"], action=["429"], log=["500"])

    yield Target(
        "modelarts", backend, ma_env, _code(tmp_path), {"succeed": "complete", "fail7": "fail7", "run": "hang"},
        {"modelarts": {"obs_dir": f"obs://{BUCKET}/conformance/"}},
        ["conf-20260101-000000-abcdef", "0a0a0a0a-0000-4000-8000-000000000000"], seed, unkind,
    )  # fmt: skip
    assert fake_ma.signature_failures == [] and fake_ma.body_errors == []


def _volcano(tmp_path: Path, cli_env: Dict[str, str]) -> Iterator[Target]:
    kube = FakeKube(tick=0.3)
    config = kube.kubeconfig(tmp_path / "kubeconfig")
    env = {**cli_env, "KUBECONFIG": str(config)}
    backend = VolcanoBackend(kubeconfig=str(config), environ=env, poll_interval=0.2, policy=QUICK)

    def seed(count: int) -> List[str]:
        template = kube.cluster.created[0]
        ids = []
        with kube.cluster.lock:
            for n in range(count):
                manifest = {**template, "metadata": {**template["metadata"], "name": f"seeded-{n:03d}"}}
                job = FakeVolcanoJob("ml", manifest, f"seed-{n}")
                job.created = f"2023-11-14T22:{n // 60:02d}:{n % 60:02d}Z"
                job.phase, job.step, job.pods = "Completed", 99, []
                kube.cluster.jobs[("ml", job.name)] = job
                ids.append(f"ml/{job.name}")
        return ids

    def unkind() -> None:
        kube.cluster.faults.update({"GET job": ["429", "503"], "pods": ["500"], "command": ["503"]})

    yield Target(
        "volcano", backend, env, _code(tmp_path), {"succeed": "succeed", "fail7": "fail7", "run": "run"},
        {"volcano": {"not_retryable_exit_codes": [2, 7]}}, ["ml/conf-20260101-000000-abcdef"], seed, unkind,
    )  # fmt: skip
    kube.close()
    assert kube.cluster.problems == [], "the API server saw requests it would refuse"


def _local_harness(request: pytest.FixtureRequest, tmp_path: Path, cli_env: Dict[str, str], home: Path) -> Any:
    return _local(tmp_path, cli_env, home)


def _modelarts_harness(request: pytest.FixtureRequest, tmp_path: Path, cli_env: Dict[str, str], home: Path) -> Any:
    fakes = (request.getfixturevalue(name) for name in ("ma_env", "fake_ma", "s3"))
    return _modelarts(tmp_path, *fakes)


def _volcano_harness(request: pytest.FixtureRequest, tmp_path: Path, cli_env: Dict[str, str], home: Path) -> Any:
    return _volcano(tmp_path, cli_env)


def _test_backends() -> Dict[str, Tuple[str, str]]:
    """The backends of the tests: each folder beside this module with a ``harness.py``, by its registry line."""
    found = {}
    for folder in sorted(Path(__file__).resolve().parent.iterdir()):
        if (folder / "__init__.py").is_file() and (folder / "harness.py").is_file():
            line: Tuple[str, str] = importlib.import_module(folder.name).LINE
            found[line[0]] = line
    return found


TEST_BACKENDS = _test_backends()


@pytest.fixture(params=[*registry.BACKEND_NAMES, *TEST_BACKENDS])
def target(
    request: pytest.FixtureRequest, tmp_path: Path, cli_env: Dict[str, str], home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Target]:  # fmt: skip
    name = request.param
    if name in TEST_BACKENDS:
        monkeypatch.setitem(registry.BACKEND_MODULES, *TEST_BACKENDS[name])  # its one line, for the test
        harness = importlib.import_module(f"{TEST_BACKENDS[name][1]}.harness").make_target
        yield from harness(Target, tmp_path, cli_env, home)
        return
    shipped = globals().get(f"_{name}_harness")
    assert shipped is not None, f"backend {name!r} has no conformance harness: add _{name}_harness here"
    yield from shipped(request, tmp_path, cli_env, home)


def of_host(host: int, line: str) -> bool:
    """Whether ``line``'s one prefix names host ``host`` (``[host 1] ``, ``[host 1 rank 1] ``)."""
    return line.startswith((f"[host {host}] ", f"[host {host} "))


def _until(target: Target, job_id: str, *states: JobState) -> None:
    deadline = time.monotonic() + WAIT
    while target.backend.status(job_id).state not in states:
        assert time.monotonic() < deadline, f"{job_id} never reached {states}"
        time.sleep(0.1)


def _until_the_next_second(since: float) -> None:
    """Until the clock is past the whole second of ``since``: a job created from then on has a later creation time
    than one created before ``since``, also where creation times have whole seconds (Kubernetes). Half a second on
    average, where a fixed 1.1 s was slept."""
    while int(time.time()) <= int(since):
        time.sleep(0.01)


# -- 1. one id -------------------------------------------------------------------------------------------------


def test_the_id_submit_returns_is_the_plans_and_every_verb_takes_it(target: Target) -> None:
    backend = target.backend
    spec = target.spec("succeed")
    now = time.time()
    plan = backend.plan(spec, job_id=backend.new_job_id(spec, now), now=now)
    handle = backend.execute(plan)
    target.submitted.append(handle.id)
    assert handle.id == plan.job_id
    assert backend.status(handle.id).id == handle.id
    assert backend.resolve_id(handle.id) == handle.id
    final = handle.wait(timeout=WAIT, poll_interval=0.1)
    assert (final.id, final.state) == (handle.id, JobState.SUCCEEDED)
    assert [line for line in backend.logs(handle.id) if of_host(1, line)]
    assert handle.id in [status.id for status in backend.list()]
    assert backend.stop(handle.id).state is JobState.SUCCEEDED  # ended: stop changes nothing


# -- 2. terminal states carry the exit code ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "state", "code"), [("succeed", JobState.SUCCEEDED, 0), ("fail7", JobState.FAILED, 7)]
)
def test_a_job_that_ended_is_terminal_with_its_exit_code(
    target: Target, scenario: str, state: JobState, code: int
) -> None:
    job_id = target.submit(scenario)
    final = target.backend.handle(job_id).wait(timeout=WAIT, poll_interval=0.1)
    assert (final.state, final.exit_code, final.is_terminal) == (state, code, True)
    again = target.backend.status(job_id)
    assert (again.state, again.exit_code) == (state, code)
    assert final.ended_at is not None


# -- 3. stop: idempotent, and the job stays visible --------------------------------------------------------------


def test_stop_is_idempotent_and_the_stopped_job_stays_visible(target: Target) -> None:
    backend = target.backend
    job_id = target.submit("run")
    _until(target, job_id, JobState.RUNNING)
    target.unkind()
    stopped = backend.stop(job_id)
    assert stopped.state is JobState.STOPPED and stopped.exit_code is not None, stopped
    again = backend.stop(job_id)
    assert (again.id, again.state, again.exit_code) == (job_id, JobState.STOPPED, stopped.exit_code)
    target.unkind()
    status = backend.status(job_id)
    assert (status.state, status.exit_code) == (JobState.STOPPED, stopped.exit_code)
    waited = backend.handle(job_id).wait(timeout=WAIT, poll_interval=0.1)
    assert (waited.state, waited.exit_code) == (JobState.STOPPED, stopped.exit_code)
    assert isinstance(list(backend.logs(job_id)), list)  # still there: no JobNotFound
    assert isinstance(list(backend.logs(job_id, follow=True)), list)  # an ended job's follow ends
    listed = {s.id: s for s in backend.list()}
    assert listed[job_id].state is JobState.STOPPED
    cli = target.cli(["status", "--backend", target.name, job_id], target.env)
    assert cli.returncode == 0 and "state:     STOPPED" in cli.stdout, cli.stderr


# -- 4. unknown ids ----------------------------------------------------------------------------------------------


def test_an_unknown_id_is_job_not_found_everywhere(target: Target) -> None:
    backend = target.backend
    for job_id in target.unknown:
        for verb in (backend.status, lambda j: list(backend.logs(j)), backend.stop):
            with pytest.raises(JobNotFound):
                verb(job_id)
        with pytest.raises(JobNotFound):
            backend.handle(job_id).wait(timeout=5)
        for command in (["status"], ["logs"], ["stop"], ["wait"]):
            done = target.cli([*command, "--backend", target.name, job_id], target.env)
            assert done.returncode == 4, (command, done.stdout, done.stderr)
            assert "no job with id" in done.stderr and "Traceback" not in done.stderr


# -- 5. list -----------------------------------------------------------------------------------------------------


def test_list_is_every_job_newest_first_with_the_state_status_gives(target: Target) -> None:
    backend = target.backend
    ids = []
    for scenario in ("succeed", "fail7", "succeed"):
        ids.append(target.submit(scenario))
        _until_the_next_second(time.time())  # creation times have whole seconds on Kubernetes
    for job_id in ids:
        backend.handle(job_id).wait(timeout=WAIT, poll_interval=0.1)
    seeded = target.seed(120)
    target.unkind()
    listed = backend.list()
    order = [status.id for status in listed]
    assert set(seeded) | set(ids) <= set(order)
    assert [job_id for job_id in order if job_id in ids] == ids[::-1]  # newest first
    times = [status.created_at or 0.0 for status in listed]
    assert times == sorted(times, reverse=True)
    assert [job_id for job_id in order if job_id in seeded] == seeded[::-1]
    for status in listed:
        if status.id in ids:
            assert (status.state, status.is_terminal) == (backend.status(status.id).state, True)


# -- 6. following ------------------------------------------------------------------------------------------------


def test_follow_ends_when_the_job_ends_and_loses_no_line(target: Target) -> None:
    backend = target.backend
    job_id = target.submit("succeed")
    followed: List[str] = []
    reader = threading.Thread(target=lambda: followed.extend(backend.logs(job_id, follow=True)), daemon=True)
    reader.start()
    reader.join(timeout=WAIT)
    assert not reader.is_alive(), "following did not end with the job"
    assert backend.status(job_id).is_terminal
    read = list(backend.logs(job_id))
    for host in (0, 1):
        mine = [line for line in followed if of_host(host, line)]
        assert mine == [line for line in read if of_host(host, line)]
        assert len(mine) >= 2, mine
