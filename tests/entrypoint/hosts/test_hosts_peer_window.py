"""Two deaths on two hosts, one of them because of the other (issue 29.2 across hosts), shims started as a pod
starts them (own process, the platform's variables, no SDK runner).

The rank that really failed closes its connection and takes 2 s to exit 7 (an interpreter tearing down); its
peer on the other host aborts at once on gloo's ``Connection closed by peer``, so it dies first. Its host holds
its own stop for the peer window, and the coordinator holds the other host's end as long: the real failure
dies by itself on its own host, is recorded there, and is the job's root cause on every host. Before this, the
coordinator ended the other host at once, the real failure died of that stop signal, and the job's only cause
was the death that says a peer failed (seen in CI: 134 instead of 7).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Dict

import pytest
from hostsutil import Hosts, job_causes
from shimutil import free_port, wait_watched, write_v10_table


def _method_env(method: str, tmp: Path, per_host: int = 1) -> Dict[str, str]:
    if method == "ranktable":
        write_v10_table(tmp / "table.json", servers=2, devices=per_host)
        return {"MA_RUN_METHOD": "ranktable", "RANK_TABLE_FILE": str(tmp / "table.json"),
                "MALAUNCH_MASTER_PORT": str(free_port())}  # fmt: skip
    return {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": str(per_host), "MA_TORCHRUN_MASTER_PORT": str(free_port())}


def _culprit_job(hosts: list[Hosts], tmp: Path, method: str, culprit: int, per_host: int, case: str = "slow") -> Hosts:
    """Run peer_death.py's ``case`` (``slow`` or ``slow-term``) on 2 hosts x ``per_host`` ranks; the job, once every
    host exited 7 with rank ``culprit`` as the job's root cause."""
    folder = tmp / "sync"
    folder.mkdir()
    job = Hosts(tmp, 2, {**_method_env(method, tmp, per_host), "MALAUNCH_GRACE_PERIOD": "8"}, script="peer_death.py",
                args=(str(folder), case, str(culprit), str(2 * per_host)))  # fmt: skip
    hosts.append(job)
    job.start_all()
    deadline = time.monotonic() + 120
    while len(list(folder.glob("ready-*"))) < 2 * per_host:
        assert time.monotonic() < deadline, job.console(0)[-2000:] + job.console(1)[-2000:]
        assert all(proc.poll() is None for proc in job.procs.values()), job.console(0) + job.console(1)
        time.sleep(0.02)
    if method == "torchrun":  # each host's watch has found its torchrun's workers (the fan-out's are its own)
        for proc in job.procs.values():
            wait_watched(proc, per_host)
    (folder / "go.tmp").write_text(repr(time.time() + 0.3))
    os.replace(folder / "go.tmp", folder / "go")
    codes = [job.wait(0, timeout=120), job.wait(1, timeout=120)]
    consoles = job.console(0)[-2500:] + "\n----\n" + job.console(1)[-2500:]
    assert codes == [7, 7], consoles
    host = culprit // per_host
    for index in (0, 1):  # the same job cause on every host: the real failure
        (cause,) = job_causes(job.report(index))
        assert cause is not None, consoles
        assert (cause["host"], cause["rank"], cause["code"]) == (host, culprit, 7), (cause, consoles)
    own = job.report(host)["root_cause"]
    assert (own["rank"], own["exit_code"], own["signal"]) == (culprit, 7, None), own
    assert f"rank {culprit} failing on purpose" in "\n".join(own["tail"]), own["tail"]
    return job


@pytest.mark.process
@pytest.mark.parametrize("culprit", [1, 0])  # the host whose rank really fails (0: the coordinator's own)
@pytest.mark.parametrize("method", ["ranktable", pytest.param("torchrun", marks=pytest.mark.torch)])
def test_a_consequence_that_dies_first_on_another_host_is_not_the_jobs_root_cause(
    hosts: list[Hosts], tmp_path: Path, method: str, culprit: int
) -> None:
    job = _culprit_job(hosts, tmp_path, method, culprit, per_host=1)
    # the consequence died first, by itself, with the peer's failure in its log: its host's own account says so
    seen = job.report(1 - culprit)["attempts"][0]["root_cause"]
    assert (seen["rank"], seen["exit_code"]) == (1 - culprit, 134), seen
    assert any("Connection closed by peer" in line for line in seen["tail"]), seen["tail"]


@pytest.mark.process
@pytest.mark.parametrize("culprit", [3, 0])  # rank 3 on host 1; rank 0 on the coordinator's host
@pytest.mark.parametrize("method", ["ranktable", pytest.param("torchrun", marks=pytest.mark.torch)])
def test_every_other_rank_of_both_hosts_dying_first_does_not_hide_the_real_failure(
    hosts: list[Hosts], tmp_path: Path, method: str, culprit: int
) -> None:
    # 2 hosts x 2 ranks (the DDP tutorial's shape): the three other ranks all abort on "Connection closed by
    # peer" before the culprit exits 7 (rank 0 on the culprit's, the others as rank 0 dies); the culprit's own
    # host holds for a local peer death too
    job = _culprit_job(hosts, tmp_path, method, culprit, per_host=2)
    assert "failed after a peer" in job.report(culprit // 2)["root_cause"]["why"]


@pytest.mark.process
@pytest.mark.torch
def test_a_sibling_stopped_by_torchrun_itself_during_the_hold_does_not_end_it(
    hosts: list[Hosts], tmp_path: Path
) -> None:
    # issue 43.6: torchrun's own 0.1 s monitor may see host 0's first failed worker (rank 0, aborting on the
    # culprit's closed connection) before the gate pauses it, and SIGTERM rank 1. That death by a stop signal the
    # shim never sent says nothing of its own: host 0's hold goes on, the coordinator does not end host 1, and
    # rank 3 exits 7 by itself. peer_death.py's slow-term makes rank 1 die so every time (before: host 0 ended
    # its hold at rank 1's death, the coordinator ended host 1, and rank 0's abort was the job's cause)
    job = _culprit_job(hosts, tmp_path, "torchrun", 3, per_host=2, case="slow-term")
    assert "failed after a peer" in job.report(1)["root_cause"]["why"]
