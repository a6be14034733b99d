"""A Volcano job of 1,024 hosts against the fake API server: ``status`` and ``list`` read its pods in pages (a
fixed, small number of requests, whatever the hosts), decoded whole and in host order; ``logs`` reads each host's
log once, several at a time, and prints them in host order."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Tuple

import pytest
from kubefake import POD_PAGE_CAP, FakeKube
from malaunch.sdk.backends.volcano.backend import VolcanoBackend
from malaunch.sdk.backends.volcano.client import LIST_RESTARTS
from malaunch.sdk.backends.volcano.logs import READ_AHEAD, RELIST_POLLS, read_pod_logs
from malaunch.sdk.errors import BackendError
from malaunch.sdk.spec.loader import spec_from_mapping
from malaunch.sdk.status import HostState, JobState
from sdkutil import wait_for

HOSTS = 1_024


def _job(hosts: int) -> Dict[str, object]:
    return {
        "name": "vc-wide", "run_method": "torchrun", "code_dir": ".", "boot_file": "train.py",
        "image": "reg.example/malaunch:0.1.0", "backend": "volcano", "resources": {"hosts": hosts,
        "devices_per_host": 1}, "env": {"MALAUNCH_TEST_SCENARIO": "idle"},
    }  # fmt: skip


def _pod_lists(requests: List[Tuple[str, str]]) -> int:
    return sum(1 for method, path in requests if method == "GET" and path == "/api/v1/namespaces/ml/pods")


def test_status_and_list_of_1024_hosts_read_the_pods_in_a_few_pages(kube: FakeKube, kubeconfig: Path) -> None:
    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2)
    handle = backend.submit(spec_from_mapping(_job(HOSTS)))
    wait_for(lambda: handle.status().state is JobState.RUNNING, timeout=60, what="the 1,024 pods running")
    pages = math.ceil(HOSTS / POD_PAGE_CAP)
    before = len(kube.cluster.requests)
    status = handle.status()
    asked = kube.cluster.requests[before:]
    assert [h.index for h in status.hosts] == list(range(HOSTS))
    assert {h.state for h in status.hosts} == {HostState.RUNNING}
    assert status.hosts[-1].log_file == f"kubectl logs -n ml {handle.id.split('/')[1]}-worker-{HOSTS - 1}"
    assert len(asked) == 1 + pages and _pod_lists(asked) == pages, asked  # the job, then its pods page by page
    before = len(kube.cluster.requests)
    (listed,) = backend.list()
    asked = kube.cluster.requests[before:]
    assert listed.id == handle.id and len(listed.hosts) == HOSTS
    assert len(asked) == 1 + pages and _pod_lists(asked) == pages, asked
    assert kube.cluster.problems == []  # every pod list asked with limit and followed its continue tokens


def test_logs_of_1024_hosts_read_each_log_once_and_print_in_host_order(kube: FakeKube, kubeconfig: Path) -> None:
    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2)
    handle = backend.submit(spec_from_mapping(_job(HOSTS)))
    wait_for(lambda: handle.status().state is JobState.RUNNING, timeout=60, what="the 1,024 pods running")
    before = len(kube.cluster.requests)
    lines = list(handle.logs())
    assert lines == [f"[host {i} rank {i}] hello from host {i}" for i in range(HOSTS)]
    logs = [path for method, path in kube.cluster.requests[before:] if path.endswith("/log")]
    assert len(logs) == len(set(logs)) == HOSTS


def _pod(index: int) -> Mapping[str, Any]:
    meta = {"name": f"w-{index}", "uid": f"u-{index}", "annotations": {"volcano.sh/task-index": str(index)}}
    state = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    return {"metadata": meta, "status": {"containerStatuses": [{"name": "worker", "state": state}]}}


def test_the_next_hosts_logs_are_read_while_one_is_printed() -> None:
    """Hosts 1 to 3 are only answered once all three are being read at the same time: read one after the
    other (as before), each of them waits in vain and the barrier breaks."""
    together = threading.Barrier(3, timeout=20)
    broken: List[str] = []

    def read_log(name: str, follow: bool) -> Iterator[bytes]:
        assert not follow
        if name in ("w-1", "w-2", "w-3"):
            try:
                together.wait()
            except threading.BrokenBarrierError:
                broken.append(name)
        yield f"line of {name}\n".encode()

    assert READ_AHEAD >= 3
    lines = list(read_pod_logs(lambda: [_pod(i) for i in reversed(range(6))], read_log))
    assert lines == [f"[host {i}] line of w-{i}" for i in range(6)]
    assert broken == []


def test_a_quiet_follower_of_1024_hosts_does_not_list_every_pod_each_poll(kube: FakeKube, kubeconfig: Path) -> None:
    """While every pod runs and nothing changes, the follower asks for the job each poll and lists the pods only
    every RELIST_POLLS polls; when the job goes, it still drains every host's stream and ends."""
    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.1)
    handle = backend.submit(spec_from_mapping(_job(HOSTS)))
    wait_for(lambda: handle.status().state is JobState.RUNNING, timeout=60, what="the 1,024 pods running")
    lines: List[str] = []
    follower = threading.Thread(target=lambda: lines.extend(handle.logs(follow=True)), daemon=True)
    follower.start()
    wait_for(lambda: len(lines) >= HOSTS, timeout=120, what="every host's first line")
    before = len(kube.cluster.requests)
    job_path = f"/apis/batch.volcano.sh/v1alpha1/namespaces/ml/jobs/{handle.id.split('/')[1]}"
    polls = lambda: sum(1 for m, p in kube.cluster.requests[before:] if m == "GET" and p == job_path)  # noqa: E731
    wait_for(lambda: polls() >= 2 * RELIST_POLLS, timeout=120, what=f"{2 * RELIST_POLLS} polls")
    window = kube.cluster.requests[before:]
    pages = math.ceil(HOSTS / POD_PAGE_CAP)
    gets = sum(1 for m, p in window if m == "GET" and p == job_path)
    assert _pod_lists(window) <= pages * (gets // RELIST_POLLS + 1), (gets, _pod_lists(window))
    with kube.cluster.lock:
        kube.cluster.delete(kube.cluster.jobs[("ml", handle.id.split("/")[1])])
    follower.join(timeout=120)
    assert not follower.is_alive()
    assert sorted(lines) == sorted(f"[host {i} rank {i}] hello from host {i}" for i in range(HOSTS))


def test_a_list_whose_continue_token_expires_starts_again_and_is_whole(kube: FakeKube, kubeconfig: Path) -> None:
    """The API server refuses an expired ``continue`` token (410): the pod list starts again from its first page
    and comes back whole; a token expiring at every start ends in one clear error, not a partial list."""
    hosts = POD_PAGE_CAP + 10  # two pages
    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2)
    handle = backend.submit(spec_from_mapping(_job(hosts)))
    wait_for(lambda: handle.status().state is JobState.RUNNING, timeout=60, what="the pods running")
    kube.cluster.faults["pods continue"] = ["410"]
    before = len(kube.cluster.requests)
    status = handle.status()
    assert [h.index for h in status.hosts] == list(range(hosts))
    assert _pod_lists(kube.cluster.requests[before:]) == 2 + 2  # a first page, the refused one, then both again
    assert kube.cluster.faults["pods continue"] == []
    kube.cluster.faults["pods continue"] = ["410"] * (LIST_RESTARTS + 1)
    with pytest.raises(BackendError) as raised:
        handle.status()
    text = str(raised.value)
    assert "answered 410" in text and f"started {LIST_RESTARTS + 1} times" in text and "\n" not in text
