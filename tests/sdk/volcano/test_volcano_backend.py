"""The Volcano backend against a Kubernetes API server on 127.0.0.1 (``kubefake``): submit, status, wait,
logs (read and followed), stop and list through the official client, and ``ma-submit --backend volcano``
end to end, including a pod that exits 7 making ``ma-submit`` exit 7."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import yaml
from kubefake import FakeKube, submit_detached, volcano_job
from malaunch.sdk import BackendError, ConfigError, JobNotFound, JobState, spec_from_mapping
from malaunch.sdk.backends._http import RetryPolicy
from malaunch.sdk.backends.volcano.backend import VolcanoBackend
from malaunch.sdk.backends.volcano.client import KubeTarget, resolve_target
from malaunch.sdk.backends.volcano.logs import read_pod_logs
from malaunch.sdk.status import HostState, exit_code_of
from prefix_checks import Written, one_prefix
from sdkutil import ma_submit, wait_for
from serving import stop_serving
from volcano_checks import crd_errors

WAIT = 120.0


def backend_for(kubeconfig: Path) -> VolcanoBackend:
    return VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2)


def job_data(scenario: str, hosts: int = 2) -> Dict[str, Any]:
    return volcano_job(scenario, hosts, volcano={"not_retryable_exit_codes": [2, 7]})


def test_submit_status_wait_logs(kube: FakeKube, kubeconfig: Path) -> None:
    backend = backend_for(kubeconfig)
    handle = backend.submit(spec_from_mapping(job_data("succeed")))
    namespace, name = handle.id.split("/")
    assert namespace == "ml"  # the kubeconfig context's namespace
    (created,) = kube.cluster.created
    assert created["metadata"] == {**created["metadata"], "name": name, "namespace": "ml"}
    assert crd_errors(created) == []
    first = handle.status()
    assert first.state in (JobState.PENDING, JobState.RUNNING) and first.exit_code is None
    final = handle.wait(timeout=WAIT, poll_interval=0.1)
    assert (final.state, final.exit_code, final.raw_state) == (JobState.SUCCEEDED, 0, "Completed")
    assert [(h.index, h.state, h.exit_code) for h in final.hosts] == [
        (0, HostState.EXITED, 0),
        (1, HostState.EXITED, 0),
    ]
    assert final.hosts[1].address == "10.0.0.11" and final.name == "vc-succeed"
    assert list(handle.logs()) == [
        "[host 0 rank 0] hello from host 0",
        "[host 0 rank 0] done, no newline",
        "[host 1 rank 1] hello from host 1",
        "[host 1 rank 1] done, no newline",
    ]
    assert [s.id for s in backend.list()] == [handle.id]


def test_follow_streams_until_the_job_ends(kube: FakeKube, kubeconfig: Path) -> None:
    backend = backend_for(kubeconfig)
    handle = backend.submit(spec_from_mapping(job_data("succeed", hosts=3)))
    lines = list(handle.logs(follow=True))
    assert handle.status().state is JobState.SUCCEEDED  # following ended only with the job
    for index in range(3):
        mine = [line for line in lines if line.startswith(f"[host {index} ")]
        assert mine == [
            f"[host {index} rank {index}] hello from host {index}",
            f"[host {index} rank {index}] done, no newline",
        ]
    assert any(method == "GET" and path.endswith("/log") for method, path in kube.cluster.requests)


def test_a_pod_that_exits_7_fails_the_job_with_7(kube: FakeKube, kubeconfig: Path) -> None:
    backend = backend_for(kubeconfig)
    handle = backend.submit(spec_from_mapping(job_data("fail7", hosts=3)))
    policies = kube.cluster.created[0]["spec"]["tasks"][0]["policies"]
    assert policies[:2] == [{"exitCode": 2, "action": "AbortJob"}, {"exitCode": 7, "action": "AbortJob"}]
    final = handle.wait(timeout=WAIT, poll_interval=0.1)
    assert (final.state, final.exit_code, final.raw_state) == (JobState.FAILED, 7, "Aborted")
    assert exit_code_of(final) == 7
    assert "-worker-1 exited with code 7" in final.message
    assert sorted(h.exit_code or 0 for h in final.hosts) == [7, 143, 143]
    assert "[host 1 rank 1] RuntimeError: boom" in list(handle.logs())


def test_each_line_has_one_prefix_naming_its_host_and_writer(kube: FakeKube, kubeconfig: Path) -> None:
    """The pods' consoles carry the shim's one prefix a line; the merged stream names the host in that same prefix
    (it showed ``[host 1] [rank 1] ...``: two prefixes), read once and followed alike."""
    backend = backend_for(kubeconfig)
    handle = backend.submit(spec_from_mapping(job_data("timeout")))
    followed = list(handle.logs(follow=True))
    read = list(handle.logs())
    assert one_prefix(read) == [
        Written(0, "rank 0", "hello from host 0"),
        Written(0, "rank 0", "got SIGTERM"),
        Written(1, "rank 1", "hello from host 1"),
        Written(1, "rank 1", "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(...)"),
        Written(1, "ma-entrypoint", "failure class: collective_timeout (retryable): a collective ..."),
    ]
    assert sorted(one_prefix(followed), key=str) == sorted(one_prefix(read), key=str)


def test_a_line_no_prefix_came_with_names_its_host_alone() -> None:
    """A launcher's own line written around the shim has no writer to name: its host alone, once."""
    running = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    pod = {"metadata": {"name": "w-1", "uid": "u-1", "annotations": {"volcano.sh/task-index": "1"}},
           "status": {"containerStatuses": [{"name": "worker", "state": running}]}}  # fmt: skip
    log = b"[rank 3] x\n[local rank 0] y\nW1129 torchrun warning\n[torchrun] z\n[ma-entrypoint] exit code 0"
    assert list(read_pod_logs(lambda: [pod], lambda name, follow: iter([log]))) == [
        "[host 1 rank 3] x", "[host 1 local rank 0] y", "[host 1] W1129 torchrun warning", "[host 1 torchrun] z",
        "[host 1 ma-entrypoint] exit code 0",
    ]  # fmt: skip


def test_a_pod_killed_for_its_memory_says_so_on_the_jobs_line(kube: FakeKube, kubeconfig: Path) -> None:
    """A container the kernel killed for its memory (exit 137, reason OOMKilled; its log just stops): the job's line
    said only "exited with code 137", as for any SIGKILL; it now says why and what to do."""
    handle = backend_for(kubeconfig).submit(spec_from_mapping(job_data("oom")))
    final = handle.wait(timeout=WAIT, poll_interval=0.1)
    assert (final.state, final.exit_code) == (JobState.FAILED, 137)
    assert final.message == (f"pod {handle.id.split('/')[1]}-worker-1 exited with code 137, killed for its memory "
                             "(OOMKilled: it went over its memory limit); give it more memory or use less")
    assert [(h.exit_code, h.detail) for h in final.hosts] == [(143, "Error"), (137, "OOMKilled")]


def test_a_restarted_job_succeeds_and_its_new_pods_are_followed(kube: FakeKube, kubeconfig: Path) -> None:
    backend = backend_for(kubeconfig)
    handle = backend.submit(spec_from_mapping(job_data("restart")))
    lines = list(handle.logs(follow=True))
    assert "[host 0 rank 0] transient failure" in lines  # from the first pods
    assert "[host 0 rank 0] attempt 2" in lines and "[host 1 rank 1] attempt 2" in lines  # from the new ones
    final = handle.wait(timeout=WAIT, poll_interval=0.1)
    assert (final.state, final.exit_code) == (JobState.SUCCEEDED, 0)
    assert "Restarting" in kube.cluster.phases  # Restarting -> RUNNING itself: test_volcano_manifest.py


def test_stop_terminates_the_job_keeps_its_record_and_delete_removes_it(kube: FakeKube, kubeconfig: Path) -> None:
    backend = backend_for(kubeconfig)
    handle = backend.submit(spec_from_mapping(job_data("run")))
    wait_for(lambda: handle.status().state is JobState.RUNNING, WAIT, "the job to run")
    stopped = handle.stop()
    assert (stopped.state, stopped.exit_code, stopped.raw_state) == (JobState.STOPPED, 143, "Terminated")
    namespace, name = handle.id.split("/")
    assert backend.api.list_pods(namespace, name) == []
    (command,) = kube.cluster.commands
    assert (command["action"], command["target"]["name"]) == ("TerminateJob", name)
    assert not [r for r in kube.cluster.requests if r[0] == "DELETE"]  # the record stays
    assert (handle.status().state, handle.status().exit_code) == (JobState.STOPPED, 143)
    assert handle.stop().state is JobState.STOPPED and len(kube.cluster.commands) == 1  # idempotent
    assert [s.id for s in backend.list()] == [handle.id]
    kube.cluster.delete_ticks = 2  # a deleted job stays visible a while, as on a real cluster
    assert backend.delete(handle.id) == handle.id
    with pytest.raises(JobNotFound, match="no job with id"):
        handle.status()


def test_unknown_ids_and_refused_credentials(kube: FakeKube, kubeconfig: Path, tmp_path: Path) -> None:
    backend = backend_for(kubeconfig)
    with pytest.raises(JobNotFound, match="'ml/nope'"):
        backend.status("nope")
    with pytest.raises(JobNotFound, match="'other/nope'"):
        list(backend.logs("other/nope"))
    bad = tmp_path / "bad-kubeconfig"
    bad.write_text(kubeconfig.read_text().replace("fake-token-123", "wrong"))
    with pytest.raises(ConfigError, match=r"answered 401.*refresh the kubeconfig"):  # exit 2, as ModelArts' refusal
        backend_for(bad).status("ml/x")
    kube.cluster.problems.clear()  # the wrong token was the point


def test_an_unreachable_cluster_is_one_clear_error(tmp_path: Path) -> None:
    server = FakeKube()
    config = server.kubeconfig(tmp_path / "kubeconfig")
    server.close()  # nothing listens there any more
    refused = r"cannot reach the Kubernetes API at 127\.0\.0\.1:\d+: the connection was refused"
    with pytest.raises(BackendError, match=refused):
        backend_for(config).status("ml/x")


def test_configuration_is_found_like_kubectl_finds_it(tmp_path: Path) -> None:
    present = {"/k/a", "/home/me/.kube/config", "/var/run/secrets/kubernetes.io/serviceaccount/token"}

    def exists(path: str) -> bool:
        return path in present

    env = {"HOME": "/home/me", "KUBECONFIG": f"/k/a{os.pathsep}/k/b"}
    assert resolve_target(env, exists=exists) == KubeTarget("/k/a", None, False)
    assert resolve_target(env, "/k/a", "ctx", exists=exists) == KubeTarget("/k/a", "ctx", False)
    assert resolve_target({"HOME": "/home/me"}, exists=exists) == KubeTarget("/home/me/.kube/config", None, False)
    pod = {"HOME": "/root", "KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    assert resolve_target(pod, exists=exists) == KubeTarget(None, None, True)
    with pytest.raises(ConfigError, match="kubeconfig file not found"):
        resolve_target(env, "/k/b", exists=exists)
    with pytest.raises(ConfigError, match="set KUBECONFIG"):
        resolve_target({"HOME": "/root"}, exists=exists)


def test_the_context_picks_the_namespace(kube: FakeKube, kubeconfig: Path) -> None:
    config = yaml.safe_load(kubeconfig.read_text())
    other = {"name": "other", "context": {"cluster": "fake", "user": "tester", "namespace": "team-b"}}
    config["contexts"].append(other)
    kubeconfig.write_text(yaml.safe_dump(config))
    backend = VolcanoBackend(kubeconfig=str(kubeconfig), context="other", environ={})
    assert backend.api.namespace == "team-b"
    with pytest.raises(JobNotFound, match="'team-b/nope'"):
        backend.status("nope")
    with pytest.raises(ConfigError, match=r"no such context.*use one of: fake, other"):
        _ = VolcanoBackend(kubeconfig=str(kubeconfig), context="nope", environ={}).api


# -- ma-submit, the real console script --------------------------------------------------------------------


@pytest.fixture
def kube_env(cli_env: Dict[str, str], kubeconfig: Path, tmp_path: Path) -> Dict[str, str]:
    env = dict(cli_env)
    env["KUBECONFIG"] = str(kubeconfig)
    env["HOME"] = str(tmp_path)
    return env


def write_job_file(folder: Path, data: Dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text("print('hi')\n")
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_cli_submit_follows_and_exits_with_the_pods_code(kube_env: Dict[str, str], tmp_path: Path) -> None:
    job = write_job_file(tmp_path / "job", job_data("fail7", hosts=2))
    done = ma_submit(["--backend", "volcano", str(job)], kube_env)
    assert done.returncode == 7, done.stderr
    assert "[host 1 rank 1] RuntimeError: boom" in done.stdout
    assert "FAILED" in done.stderr and "exited with code 7" in done.stderr
    assert "Traceback" not in done.stderr


def test_cli_manages_a_job(kube_env: Dict[str, str], tmp_path: Path) -> None:
    job = write_job_file(tmp_path / "job", job_data("succeed"))
    submitted = ma_submit(["--backend", "volcano", "--detach", str(job)], kube_env)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    assert job_id.startswith("ml/vc-succeed-")
    waited = ma_submit(["wait", "--backend", "volcano", job_id], kube_env)
    assert waited.returncode == 0 and "SUCCEEDED" in waited.stdout, waited.stderr
    status = ma_submit(["status", "--backend", "volcano", job_id], kube_env)
    assert "state:     SUCCEEDED" in status.stdout and "exit code: 0" in status.stdout
    logs = ma_submit(["logs", "--backend", "volcano", "-f", job_id], kube_env)
    assert logs.stdout.splitlines()[0] == "[host 0 rank 0] hello from host 0", logs.stderr
    listed = ma_submit(["list", "--backend", "volcano"], kube_env)
    assert job_id in listed.stdout
    name = job_id.split("/", 1)[1]  # a bare name, and a bare prefix of it: the context's namespace (ml)
    for bare in (name, name[: len("vc-succeed-2026")]):
        found = ma_submit(["status", "--backend", "volcano", bare], kube_env)
        assert found.returncode == 0 and f"id:        {job_id}\n" in found.stdout, (bare, found.stderr)
    stopped = ma_submit(["stop", "--backend", "volcano", job_id], kube_env)
    assert stopped.returncode == 0 and f"job {job_id} SUCCEEDED" in stopped.stdout  # ended: stop is a no-op


def test_cli_stop_a_running_job(kube_env: Dict[str, str], tmp_path: Path) -> None:
    job = write_job_file(tmp_path / "job", job_data("run"))
    job_id = ma_submit(["--backend", "volcano", "--detach", str(job)], kube_env).stdout.strip()
    stopped = ma_submit(["stop", "--backend", "volcano", job_id], kube_env)
    assert stopped.returncode == 0 and f"job {job_id} STOPPED" in stopped.stdout, stopped.stderr
    kept = ma_submit(["status", "--backend", "volcano", job_id], kube_env)
    assert kept.returncode == 0 and "state:     STOPPED" in kept.stdout and "exit code: 143" in kept.stdout
    gone = ma_submit(["status", "--backend", "volcano", "ml/no-such-job"], kube_env)
    assert gone.returncode == 4 and "no job with id" in gone.stderr


def dry_run_manifest(stdout: str) -> Dict[str, Any]:
    data: Dict[str, Any] = yaml.safe_load(stdout)
    return data


def test_cli_dry_run_of_a_4_host_msrun_job_is_kubectl_ready(cli_env: Dict[str, str], tmp_path: Path) -> None:
    data = {**job_data("succeed", hosts=4), "run_method": "msrun", "backend": "local"}
    job = write_job_file(tmp_path / "job", data)
    env = {**cli_env, "KUBECONFIG": str(tmp_path / "no-such-kubeconfig"), "HOME": str(tmp_path)}
    done = ma_submit(["--backend", "volcano", "--dry-run", str(job)], env)  # no cluster, no kubeconfig needed
    assert done.returncode == 0, done.stderr
    manifest = dry_run_manifest(done.stdout)
    assert crd_errors(manifest) == []
    task = manifest["spec"]["tasks"][0]
    assert (task["replicas"], task["minAvailable"], manifest["spec"]["minAvailable"]) == (4, 4, 4)
    assert manifest["spec"]["plugins"] == {"env": [], "svc": ["--publish-not-ready-addresses"]}
    env_names = {e["name"] for e in task["template"]["spec"]["containers"][0]["env"]}
    contract = {"MA_NUM_HOSTS", "MA_NUM_GPUS", "MA_RUN_METHOD", "MA_VJ_NAME", "MA_TASK_NAME"}
    assert contract <= env_names
    assert all(line.startswith("#") for line in done.stdout.split("apiVersion:")[0].splitlines())


def test_missing_kubeconfig_is_one_line(cli_env: Dict[str, str], tmp_path: Path) -> None:
    env = {**cli_env, "KUBECONFIG": str(tmp_path / "absent"), "HOME": str(tmp_path)}
    done = ma_submit(["status", "--backend", "volcano", "ml/x"], env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "set KUBECONFIG" in done.stderr
    env.pop("KUBECONFIG")
    done = ma_submit(["status", "--backend", "volcano", "ml/x"], env)
    assert done.returncode == 2 and "no Kubernetes configuration" in done.stderr and "set KUBECONFIG" in done.stderr


def test_missing_kubernetes_client_names_the_extra(kube_env: Dict[str, str]) -> None:
    code = (
        "import sys; sys.modules['kubernetes'] = None\n"  # as if the extra were not installed
        "from malaunch.sdk.cli import main; main(['status', '--backend', 'volcano', 'ml/x'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=kube_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines: List[str] = done.stderr.splitlines()
    assert len(lines) == 1 and "pip install 'malaunch[volcano]'" in lines[0], done.stderr


def test_the_registry_finds_the_backend() -> None:
    from malaunch.sdk import available_backends, get_backend

    assert "volcano" in available_backends()
    backend = get_backend("volcano", environ={"KUBECONFIG": os.devnull})
    assert isinstance(backend, VolcanoBackend)


# -- the one retry policy, timeouts, and errors that are not the network -------------------------------------


def test_429_and_5xx_are_retried_with_the_one_policy(kube: FakeKube, kubeconfig: Path) -> None:
    from malaunch.sdk.backends._http import RetryPolicy

    waits: List[float] = []
    backend = VolcanoBackend(
        kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2, sleep=waits.append, policy=RetryPolicy(attempts=4)
    )
    handle = backend.submit(spec_from_mapping(job_data("succeed")))
    kube.cluster.faults["GET job"] = ["429", "500", "503"]
    kube.cluster.faults["pods"] = ["503"]
    assert handle.status().id == handle.id
    assert waits[0] == 1.0  # the 429's Retry-After is honoured
    assert len(waits) == 4 and kube.cluster.faults == {"GET job": [], "pods": []}
    kube.cluster.faults["GET job"] = ["500"] * 4
    with pytest.raises(BackendError, match=r"reading Volcano job .* failed after 4 attempts.*etcdserver"):
        handle.status()


def test_429_and_5xx_give_up_saying_to_wait_not_to_check_the_cluster(kube: FakeKube, kubeconfig: Path) -> None:
    """The last answer in the API server's words, once, and what to do about a busy or failing server (it said
    "check the cluster (is Volcano installed?) and the job file; check the endpoint and your network")."""
    from malaunch.sdk.backends._http import RetryPolicy

    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2, sleep=lambda _: None,
                             policy=RetryPolicy(attempts=3))  # fmt: skip
    handle = backend.submit(spec_from_mapping(job_data("succeed")))
    kube.cluster.faults["GET job"] = ["429"] * 3
    with pytest.raises(BackendError) as caught:
        handle.status()
    text = str(caught.value)
    assert "failed after 3 attempts over " in text, text
    assert text.endswith("s, last: the Kubernetes API answered 429, 'too many requests'; the service is limiting "
                         "requests: wait a few minutes, then try again"), text  # fmt: skip
    kube.cluster.faults["GET job"] = ["503"] * 3
    with pytest.raises(BackendError) as caught:
        handle.status()
    text = str(caught.value)
    assert "answered 503, 'etcdserver: request timed out'; the service is failing: try again later" in text, text
    assert text.count("reading Volcano job") == 1 and "Volcano installed" not in text and "network" not in text


def _noted_job(kubeconfig: Path) -> Tuple[Any, io.StringIO]:
    """A job submitted through a backend whose notes (its progress stream, empty now) the test reads."""
    notes = io.StringIO()
    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2, sleep=lambda _: None,
                             policy=RetryPolicy(attempts=3, jitter=0.0), progress=notes)  # fmt: skip
    handle = backend.submit(spec_from_mapping(job_data("succeed")))
    notes.truncate(0)
    notes.seek(0)
    return handle, notes


def test_each_retry_is_announced_as_a_note(kube: FakeKube, kubeconfig: Path) -> None:
    """The backend's notes (its progress stream) get one line per retry before its wait."""
    handle, notes = _noted_job(kubeconfig)
    kube.cluster.faults["GET job"] = ["503"]
    assert handle.status().id == handle.id
    assert notes.getvalue() == (f"ma-submit: note: reading Volcano job {handle.id}: the Kubernetes API answered 503, "
                                "'etcdserver: request timed out'; attempt 2 of 3 in 0.5s\n")  # fmt: skip


def test_an_outage_over_many_calls_is_one_note_and_one_when_it_answers_again(kube: FakeKube, kubeconfig: Path) -> None:
    """Each status read (a wait's poll) met 503s (reading the job, its PodGroups, its events): one note a retry.
    Now the retries of the first call that met the outage are noted, the others are not, and one note says it is
    over once every request retried in it is answered at its first attempt again."""
    handle, notes = _noted_job(kubeconfig)
    kube.cluster.faults["GET job"] = ["503", "ok"] * 6
    for _poll in range(4):
        assert handle.status().id == handle.id
    lines = notes.getvalue().splitlines()
    assert lines[0] == (f"ma-submit: note: reading Volcano job {handle.id}: the Kubernetes API answered 503, "
                        "'etcdserver: request timed out'; attempt 2 of 3 in 0.5s")  # fmt: skip
    assert len(lines) == 2 and ": answered at the first attempt again, " in lines[1], lines
    assert lines[1].endswith("s after the first retry; 5 more retries not noted"), lines
    assert kube.cluster.faults["GET job"] == []


@pytest.mark.parametrize(
    ("fault", "said", "hint"),
    [
        ("400 webhook", "answered 400, 'admission webhook \"validatejob.volcano.sh\" denied the request: spec.tasks[0]."
         "template.spec.containers[0].resources.requests: cpu 96 exceeds the capability of queue default (64)'",
         "the cluster refused the job (an admission webhook or a check of the API server): change what its message "
         "names in the job file"),
        ("404 namespace", "answered 404, 'namespaces \"ml\" not found'", "that namespace does not exist: create it"),
        ("404 crd", "answered 404, 'the server could not find the requested resource'",
         "is Volcano installed (its Job CRD, batch.volcano.sh)?"),
    ],
)  # fmt: skip
def test_a_refused_create_says_the_servers_whole_reason_and_what_to_do(
    kube: FakeKube, kubeconfig: Path, fault: str, said: str, hint: str
) -> None:
    """An admission webhook's reason comes at the end of its message: it was cut at 80 characters, and every refusal
    but 401/403/409 was told to check whether Volcano is installed."""
    kube.cluster.faults["POST job"] = [fault]
    with pytest.raises(BackendError) as caught:
        backend_for(kubeconfig).submit(spec_from_mapping(job_data("succeed")))
    text = str(caught.value)
    assert text == f"creating Volcano job in namespace ml: the Kubernetes API {said}; {hint}" or (
        said in text and hint in text
    ), text
    assert kube.cluster.jobs == {} and kube.cluster.secrets == {}


def test_a_create_stored_but_not_answered_is_found_on_the_retry_not_a_409(kube: FakeKube, kubeconfig: Path) -> None:
    from malaunch.sdk.backends._http import RetryPolicy

    waits: List[float] = []
    backend = VolcanoBackend(
        kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2, sleep=waits.append, policy=RetryPolicy(attempts=4)
    )
    kube.cluster.faults["POST job"] = ["500 stored"]  # the job is stored; the answer is a 500
    handle = backend.submit(spec_from_mapping(job_data("succeed")))
    assert kube.cluster.faults["POST job"] == [] and len(waits) == 1  # retried once, and that retry met its own job
    assert len(kube.cluster.created) == 1 and handle.id.endswith(kube.cluster.created[0]["metadata"]["name"])
    assert handle.wait(timeout=60).state.value == "SUCCEEDED"


def test_a_409_for_a_job_that_is_not_ours_stands(kube: FakeKube, kubeconfig: Path) -> None:
    from malaunch.sdk.backends._http import RetryPolicy

    def a_stranger_takes_the_name(_seconds: float) -> None:  # between our two posts, the stored job becomes another
        with kube.cluster.lock:
            (job,) = kube.cluster.jobs.values()
            job.manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["image"] = "someone/else:1"

    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2,
                             sleep=a_stranger_takes_the_name, policy=RetryPolicy(attempts=4))  # fmt: skip
    kube.cluster.faults["POST job"] = ["500 stored"]
    with pytest.raises(BackendError, match=r"answered 409, .*already exists.*a job of that name exists already"):
        backend.submit(spec_from_mapping(job_data("succeed")))


def test_an_unreachable_api_is_retried_then_one_line(tmp_path: Path) -> None:
    from malaunch.sdk.backends._http import RetryPolicy

    server = FakeKube(tick=0.3)
    config = server.kubeconfig(tmp_path / "kubeconfig")
    server.close()  # nobody listens there any more
    waits: List[float] = []
    backend = VolcanoBackend(kubeconfig=str(config), environ={}, sleep=waits.append, policy=RetryPolicy(attempts=3))
    with pytest.raises(BackendError, match=r"failed: cannot reach the Kubernetes API.*\(3 attempts over"):
        backend.status("ml/some-job")
    assert len(waits) == 2


def test_every_call_has_a_timeout() -> None:
    """Every call goes through ``KubeApi.send``, which always hands the pool a timeout; no generated API call of
    the client is left but exec's websocket stream (which gets no timeout from the client either way)."""
    from malaunch.sdk.backends.volcano import client, inside

    source = Path(client.__file__).read_text()
    assert source.count(".request(") == 1 and "retries=False, timeout=_timeout(timeout)" in source
    assert "_request_timeout" not in source and "CustomObjectsApi" not in source
    inside_source = Path(inside.__file__).read_text()
    assert inside_source.count("self.api.send(") == inside_source.count("timeout=_TIMEOUT") == 4
    assert inside_source.count("self.api._call(") == 4  # every call under the one policy and mapping
    assert "except Exception" not in source


def test_a_call_the_api_never_answers_ends_at_its_read_timeout(tmp_path: Path) -> None:
    """A server that takes the connection and says nothing: the call ends at its read timeout, as one line."""
    import socket
    import time

    from malaunch.sdk.backends._http import RetryPolicy
    from malaunch.sdk.backends.volcano.client import connect

    server = FakeKube(tick=0.3)
    config = server.kubeconfig(tmp_path / "kubeconfig")
    server.close()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        text = config.read_text()
        config.write_text(text.replace(server.url, f"http://127.0.0.1:{silent.getsockname()[1]}"))
        api = connect(resolve_target({}, kubeconfig=str(config)), policy=RetryPolicy(attempts=1))
        started = time.monotonic()
        silent_api = r"failed after 1 attempt.*failed to answer: the server accepted the connection but did not answer"
        with pytest.raises(BackendError, match=silent_api):
            api._call("reading Volcano job ml/j", lambda: api.send("GET", "/apis/x", timeout=(5.0, 0.5)))
        assert time.monotonic() - started < 4.0
    finally:
        silent.close()


def test_a_programming_error_is_not_reported_as_an_unreachable_api(kube: FakeKube, kubeconfig: Path) -> None:
    backend = backend_for(kubeconfig)

    def broken() -> None:
        raise TypeError("a bug in our code")

    with pytest.raises(TypeError, match="a bug in our code"):
        backend.api._call("reading something", broken)


def test_delete_returns_when_the_job_is_gone_and_forgets_it(
    kube: FakeKube, cli_env: Dict[str, str], tmp_path: Path
) -> None:
    kube.cluster.delete_ticks = 3  # a deleted job stays visible a while, as on a real cluster
    env, submitted = submit_detached(kube, cli_env, tmp_path, job_data("run"))
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    index = Path(env["MALAUNCH_HOME"]) / "job-index.json"
    assert job_id in json.loads(index.read_text())["jobs"]
    assert ma_submit(["stop", job_id], env).returncode == 0
    deleted = ma_submit(["delete", "--backend", "volcano", job_id], env)
    assert (deleted.returncode, deleted.stdout.strip()) == (0, f"deleted {job_id}"), deleted.stderr
    gone = ma_submit(["status", "--backend", "volcano", job_id], env)  # at once: the cluster no longer knows it
    assert gone.returncode == 4 and "no job with id" in gone.stderr, (gone.stdout, gone.stderr)
    assert job_id not in json.loads(index.read_text())["jobs"]  # forgotten here too


class _Answers:
    """An HTTP server on 127.0.0.1 that gives each GET the next of ``answers`` (status, headers, body), and a
    kubeconfig (written beside ``tmp_path``'s) that points the client at it."""

    def __init__(self, tmp_path: Path, answers: List[Tuple[int, Dict[str, str], bytes]]) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.answers = answers

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                code, headers, body = answers.pop(0)
                self.send_response(code)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        fake = FakeKube(tick=0.3)
        self.kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
        fake.close()
        text = self.kubeconfig.read_text().replace(fake.url, f"http://127.0.0.1:{self.server.server_address[1]}")
        self.kubeconfig.write_text(text)

    def close(self) -> None:
        stop_serving(self.server)


def test_retry_after_is_read_whatever_the_case_of_its_name(tmp_path: Path) -> None:
    """A proxy may send ``retry-after`` in lower case (HTTP/2 does); it is honoured all the same."""
    from malaunch.sdk.backends._http import RetryPolicy
    from malaunch.sdk.backends.volcano.client import connect

    slow_down = json.dumps({"kind": "Status", "message": "slow down"}).encode()
    server = _Answers(tmp_path, [(429, {"retry-after": "2"}, slow_down), (200, {}, b'{"kind": "Job"}')])
    try:
        waits: List[float] = []
        target = resolve_target({}, kubeconfig=str(server.kubeconfig))
        api = connect(target, policy=RetryPolicy(attempts=2), sleep=waits.append)
        assert api.get_job("ml", "j") == {"kind": "Job"}
        assert waits == [2.0] and server.answers == []
    finally:
        server.close()


def test_an_answer_that_is_no_json_is_one_line(tmp_path: Path) -> None:
    """A 2xx page that is not JSON (a proxy's login page, a wrong address): one line naming it and what to check."""
    from malaunch.sdk.backends.volcano.client import connect

    server = _Answers(tmp_path, [(200, {"Content-Type": "text/html"}, b"<html><body>Sign in</body></html>")])
    try:
        api = connect(resolve_target({}, kubeconfig=str(server.kubeconfig)))
        with pytest.raises(BackendError) as raised:
            api.get_job("ml", "j")
        message = str(raised.value)
        assert message.startswith("reading Volcano job ml/j: the Kubernetes API answered with something that is no "
                                  "JSON object ('<html><body>Sign in") and "\n" not in message  # fmt: skip
        assert message.endswith("; check the cluster's address in the kubeconfig")
    finally:
        server.close()
