"""A Volcano job of 1,024 hosts against the fake API server: ``status`` and ``list`` read its pods in pages (a
fixed, small number of requests, whatever the hosts), decoded whole and in host order; ``logs -f`` follows every
host and prints nothing but their lines."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, List, Tuple

from kubefake import POD_PAGE_CAP, FakeKube
from malaunch.sdk.backends.volcano import VolcanoBackend
from malaunch.sdk.spec import spec_from_mapping
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
