"""Inside a Volcano job against the Kubernetes API on 127.0.0.1 (``kubefake`` + ``kubefake_inside``), through the
official client: the pending reason from the PodGroup, pods, events and queue; events merged by time; pod
metrics and their absence; exec through the client's websocket ``stream()`` with stdin, stdout, stderr, a
terminal and the exit code, and a reader of its output that leaves midway; and missing permissions as one line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict

import pytest
from kubefake import FakeKube
from malaunch.sdk import BackendError, JobNotFound, JobState, spec_from_mapping
from malaunch.sdk.backends.volcano.backend import VolcanoBackend
from malaunch.sdk.errors import JobNotRunning
from pipeutil import into_a_pipe_that_fills_then_closes
from sdkutil import VENV_BIN, ma_submit, wait_for

WAIT = 120.0


@pytest.fixture
def kube_env(cli_env: Dict[str, str], kubeconfig: Path, tmp_path: Path) -> Dict[str, str]:
    return {**cli_env, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}


def backend_for(kubeconfig: Path) -> VolcanoBackend:
    return VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2)


def job_data(scenario: str, hosts: int = 2, queue: str = "default") -> Dict[str, Any]:
    return {
        "name": f"in-{scenario}", "run_method": "torchrun", "code_dir": ".", "boot_file": "train.py",
        "image": "reg.example/malaunch:0.1.0", "backend": "volcano",
        "resources": {"hosts": hosts, "devices_per_host": 1},
        "env": {"MALAUNCH_TEST_SCENARIO": scenario}, "volcano": {"queue": queue},
    }  # fmt: skip


def test_a_pending_job_says_why_from_podgroup_pods_events_and_queue(
    kube: FakeKube, kubeconfig: Path, kube_env: Dict[str, str]
) -> None:
    backend = backend_for(kubeconfig)
    handle = backend.submit(spec_from_mapping(job_data("unschedulable", queue="closed-q")))
    wait_for(lambda: "Insufficient" in handle.status().pending_reason, WAIT, "the PodGroup's condition")
    # The PodGroup says why from its creation on, the pods' FailedScheduling events come once the pods exist (a
    # later step of the cluster): under load the events were read before them (0 of 2). Wait for both.
    wait_for(lambda: sum(e.reason == "FailedScheduling" for e in handle.events()) == 2, WAIT, "the pods' events")
    status = handle.status()
    assert status.state is JobState.PENDING
    reason = status.pending_reason
    assert reason.startswith("queue closed-q is closed: it takes no new jobs; PodGroup ")
    assert "is unschedulable: 2/2 tasks in gang unschedulable" in reason and "3 Insufficient nvidia.com/gpu" in reason
    assert reason.count("3 Insufficient nvidia.com/gpu") == 1  # a pod saying what its PodGroup said is left out
    text = ma_submit(["status", "--backend", "volcano", handle.id], kube_env)
    assert f"waiting:   {reason}" in text.stdout.splitlines()
    data = json.loads(ma_submit(["status", "--backend", "volcano", "--output", "json", handle.id], kube_env).stdout)
    assert data["pending_reason"] == reason
    events = handle.events()
    failed = [e for e in events if e.reason == "FailedScheduling"]
    assert len(failed) == 2 and {e.level for e in failed} == {"Warning"}
    with pytest.raises(JobNotRunning, match="is PENDING, nothing of it runs; top needs a running job; queue closed"):
        handle.usage()
    refused = ma_submit(["exec", "--backend", "volcano", handle.id, "--", "true"], kube_env)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "is PENDING" in refused.stderr
    backend.stop(handle.id)


def test_a_pending_job_whose_image_cannot_be_pulled_says_so(
    kube: FakeKube, kubeconfig: Path, kube_env: Dict[str, str]
) -> None:
    """Scheduled pods whose container waits in ErrImagePull, then ImagePullBackOff: the job stays Pending, and status
    said only "PodGroup ... is Pending" and "host 0: ... PENDING Pending". Now the kubelet's reason and message, once
    for the pods that wait alike, what to check, and each host's own reason."""
    backend = backend_for(kubeconfig)
    handle = backend.submit(spec_from_mapping(job_data("imagepull")))
    wait_for(lambda: "ImagePullBackOff" in handle.status().pending_reason, WAIT, "the pods' image pull to fail")
    status = handle.status()
    name = handle.id.split("/")[1]
    assert status.state is JobState.PENDING
    assert status.pending_reason == (
        f"pod {name}-worker-0 cannot start its container (and 1 more pod the same way): ImagePullBackOff: Back-off "
        "pulling image \"reg.example/malaunch:0.1.0\"; check the job file's image (name, tag) and that the cluster "
        "may pull it (imagePullSecrets)"
    )
    assert [host.detail for host in status.hosts] == ['ImagePullBackOff: Back-off pulling image "reg.example/'
                                                      'malaunch:0.1.0"'] * 2  # fmt: skip
    shown = ma_submit(["status", "--backend", "volcano", handle.id], kube_env).stdout.splitlines()
    assert f"waiting:   {status.pending_reason}" in shown
    assert 'host 1:    10.0.0.11 PENDING ImagePullBackOff: Back-off pulling image "reg.example/malaunch:0.1.0"' in shown
    backend.stop(handle.id)


def test_events_of_a_failed_job_merged_by_time(kube: FakeKube, kubeconfig: Path, kube_env: Dict[str, str]) -> None:
    backend = backend_for(kubeconfig)
    handle = backend.submit(spec_from_mapping(job_data("fail7")))
    assert handle.wait(timeout=WAIT, poll_interval=0.1).state is JobState.FAILED
    events = list(handle.events())
    name = handle.id.split("/")[1]
    seen = [(e.source, e.reason) for e in events]
    for pod in (f"pod/{name}-worker-0", f"pod/{name}-worker-1"):
        assert seen.index((pod, "Scheduled")) < seen.index((pod, "Started"))
    (failed,) = [e for e in events if e.reason == "Failed"]
    assert (failed.source, failed.host, failed.level) == (f"pod/{name}-worker-1", 1, "Warning")
    assert failed.message == "container worker exited with code 7"
    assert ("job/" + name, "Aborted") in seen and [e.time for e in events] == sorted(e.time for e in events)
    printed = ma_submit(["events", "--backend", "volcano", handle.id], kube_env)
    assert printed.returncode == 0 and "WARNING: container worker exited with code 7" in printed.stdout
    followed = ma_submit(["events", "--backend", "volcano", "-f", "--output", "json", handle.id], kube_env)
    assert [json.loads(line)["reason"] for line in followed.stdout.splitlines()] == [e.reason for e in events]
    with pytest.raises(JobNotFound):
        backend.events("ml/no-such-job")


def test_top_with_and_without_metrics_server(kube: FakeKube, kubeconfig: Path, kube_env: Dict[str, str]) -> None:
    backend = backend_for(kubeconfig)
    handle = backend.submit(spec_from_mapping(job_data("run")))
    wait_for(lambda: handle.status().state is JobState.RUNNING, WAIT, "running")
    missing = handle.usage()
    assert missing.hosts == () and missing.note.startswith("metrics-server is not installed in this cluster")
    text = ma_submit(["top", "--backend", "volcano", handle.id], kube_env)
    assert text.returncode == 0 and text.stdout.startswith("metrics-server is not installed"), text.stderr
    kube.cluster.metrics_server = True
    report = handle.usage()
    assert [(h.host, h.cpu_cores, h.memory_bytes) for h in report.hosts] == [(0, 0.25, 512 << 20), (1, 0.5, 1 << 30)]
    table = ma_submit(["top", "--backend", "volcano", handle.id], kube_env).stdout.splitlines()
    assert table[1].split()[:6] == ["0", f"{handle.id.split('/')[1]}-worker-0", "0.25", "cores", "512.0", "MiB"]
    backend.stop(handle.id)


def test_exec_through_the_websocket_stream(kube: FakeKube, kubeconfig: Path, kube_env: Dict[str, str]) -> None:
    backend = backend_for(kubeconfig)
    handle = backend.submit(spec_from_mapping(job_data("run")))
    wait_for(lambda: handle.status().state is JobState.RUNNING, WAIT, "running")
    script = 'echo "on $HOSTNAME index $VC_TASK_INDEX"; echo oops >&2; read line; echo "got $line"; exit 3'
    result = handle.exec(["sh", "-c", script], host=1, stdin=b"hello\n")
    name = handle.id.split("/")[1]
    assert result.exit_code == 3
    assert result.stdout.decode().splitlines() == [f"on {name}-worker-1 index 1", "got hello"]
    assert result.stderr == b"oops\n"
    assert handle.exec(["true"]).exit_code == 0
    terminal = handle.exec(["sh", "-c", "test -t 1 && echo terminal"], tty=True)
    assert (terminal.exit_code, terminal.stdout.strip()) == (0, b"terminal")
    first = kube.cluster.exec_requests[0]
    assert first == {"pod": f"{name}-worker-1", "command": ["sh", "-c", script], "stdin": True, "stdout": True,
                     "stderr": True, "tty": False}  # fmt: skip
    cli = ma_submit(["exec", "--backend", "volcano", handle.id, "--host", "0", "--", "sh", "-c", "echo $HOSTNAME; "
                     "exit 4"], kube_env)  # fmt: skip
    assert (cli.returncode, cli.stdout) == (4, f"{name}-worker-0\n"), cli.stderr
    # a reader that leaves midway: not the command's 0 after output lost in silence, but 1 and where it stopped
    flood = [os.path.join(VENV_BIN, "ma-submit"), "exec", "--backend", "volcano", handle.id, "--", "sh", "-c",
             "head -c 200000 /dev/zero"]  # fmt: skip
    code, err, fitted = into_a_pipe_that_fills_then_closes(flood, kube_env)
    assert (code, err) == (1, f"ma-submit: the output stopped after {fitted:,} bytes: whoever read it closed the pipe, "
                              "and the rest was not written; send it to a file to keep all of it\n")  # fmt: skip
    nohost = ma_submit(["exec", "--backend", "volcano", handle.id, "--host", "5", "--", "true"], kube_env)
    assert nohost.returncode == 2 and "has no pod for host 5" in nohost.stderr
    kube.cluster.forbid = {"exec", "events"}
    with pytest.raises(BackendError, match="you lack permission to exec into pods here"):
        handle.exec(["true"])
    denied = ma_submit(["events", "--backend", "volcano", handle.id], kube_env)
    assert denied.returncode == 3 and denied.stderr.count("\n") == 1 and "answered 403" in denied.stderr
    backend.stop(handle.id)
