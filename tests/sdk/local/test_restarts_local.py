"""Restarts across emulated hosts (local backend, real shims, real gloo), and the failure class in a status.

The hosts' shims coordinate themselves, as in a cluster (the runner only plays the platform): when one host's
attempt fails, the job's coordinator ends the attempt of every other host, so a rank that is not inside a
collective does not wait for its timeout, and every host starts the next attempt together. A rank inside a
collective usually fails by itself first (gloo: "Connection closed by peer", retryable). When the job's
restarts are spent, every host exits with the root cause's code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from malaunch.sdk import LauncherOptions, SpecError
from malaunch.sdk.failures import classify_job_failure, failure_from_report
from malaunch.sdk.spec.loader import spec_from_mapping
from sdkutil import assert_nothing_running, job_ids, ma_submit, write_job

GLOO_JOB = """
    import os, signal, sys, time
    from datetime import timedelta
    import torch
    import torch.distributed as dist
    rank, attempt = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    print(f"rank {rank} attempt {attempt} starts", flush=True)
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    t = torch.ones(1)
    dist.all_reduce(t)
    if rank == 1 and attempt in DIES:
        print(f"rank 1 dies in attempt {attempt}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    dist.all_reduce(t)
    print(f"rank {rank} attempt {attempt} ok sum {t.item():g}", flush=True)
    dist.destroy_process_group()
    os._exit(0)  # torch 2.13's gloo can abort (134) in teardown after destroy_process_group
"""


def status_json(job_id: str, env: Dict[str, str]) -> Dict[str, Any]:
    result = ma_submit(["status", "--output", "json", job_id], env)
    assert result.returncode == 0, result.stderr
    data: Dict[str, Any] = json.loads(result.stdout)
    return data


def host_report(home: Path, job_id: str, host: int) -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads((home / "jobs" / job_id / "hosts" / str(host) / "report.json").read_text())
    return data


@pytest.mark.process
@pytest.mark.torch
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_restart_on_one_host_restarts_the_other_too(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    job = write_job(
        tmp_path / "job", "DIES = {0}\n" + GLOO_JOB.replace("\n    ", "\n"), name="mh",
        run_method="ranktable", resources={"hosts": 2, "devices_per_host": 1},
        launcher={"max_restarts": 2, "grace_period": 5},
    )  # fmt: skip
    result = ma_submit([str(job)], cli_env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "rank 0 attempt 1 ok sum 4" in result.stdout and "rank 1 attempt 1 ok sum 4" in result.stdout
    (job_id,) = job_ids(home)
    first, second = host_report(home, job_id, 0), host_report(home, job_id, 1)
    assert [a["failure_class"] for a in first["attempts"]] == ["rendezvous_timeout", None]  # its peer died
    assert [a["failure_class"] for a in second["attempts"]] == ["signal", None]  # SIGKILL: retryable
    status = status_json(job_id, cli_env)
    assert (status["state"], status["failure_class"]) == ("SUCCEEDED", None)
    assert_nothing_running(job_id)


BUSY_JOB = """
    import os, signal, sys, time
    from datetime import timedelta
    import torch
    import torch.distributed as dist
    rank, attempt = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    t = torch.ones(1)
    dist.all_reduce(t)
    print(f"rank {rank} attempt {attempt} joined", flush=True)
    if attempt == 0 and rank == 1:
        print("rank 1 dies in attempt 0", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    if attempt == 0:
        print("rank 0 computes for 10 minutes, in no collective", flush=True)
        time.sleep(600)
    dist.all_reduce(t)
    print(f"rank {rank} attempt {attempt} ok sum {t.item():g}", flush=True)
    dist.destroy_process_group()
    os._exit(0)  # torch 2.13's gloo can abort (134) in teardown after destroy_process_group
"""


@pytest.mark.process
@pytest.mark.torch
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_restart_on_one_host_ends_the_attempt_of_a_peer_outside_any_collective(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    job = write_job(
        tmp_path / "job", BUSY_JOB.replace("\n    ", "\n"), name="mh3",
        run_method="ranktable", resources={"hosts": 2, "devices_per_host": 1},
        launcher={"max_restarts": 1, "grace_period": 5},
    )  # fmt: skip
    result = ma_submit([str(job)], cli_env)  # rank 0's 600 s of compute would outlast the CLI's timeout
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "rank 0 attempt 1 ok sum 4" in result.stdout and "rank 1 attempt 1 ok sum 4" in result.stdout
    (job_id,) = job_ids(home)
    first, second = host_report(home, job_id, 0), host_report(home, job_id, 1)
    assert [a["failure_class"] for a in second["attempts"]] == ["signal", None]  # its rank was SIGKILLed
    assert [a["failure_class"] for a in first["attempts"]] == ["rendezvous_timeout", None]
    cause = first["attempts"][0]["root_cause"]
    assert (cause["name"], cause["exit_code"]) == ("another host", 3)  # ended by the coordinator
    assert "host 1 (" in cause["tail"][-1] and "failed: this host's attempt ends with it" in cause["tail"][-1]
    assert first["attempts"][0]["job_cause"]["host"] == 1 == second["attempts"][0]["job_cause"]["host"]
    assert_nothing_running(job_id)


@pytest.mark.process
@pytest.mark.torch
@pytest.mark.usefixtures("cleanup_jobs")
def test_one_host_out_of_restarts_fails_the_job_with_its_class(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    job = write_job(
        tmp_path / "job", "DIES = {0, 1, 2}\n" + GLOO_JOB.replace("\n    ", "\n"), name="mh2",
        run_method="ranktable", resources={"hosts": 2, "devices_per_host": 1},
        launcher={"max_restarts": 1, "grace_period": 5},
    )  # fmt: skip
    result = ma_submit([str(job)], cli_env)
    assert result.returncode == 137, result.stdout[-3000:] + result.stderr[-3000:]
    (job_id,) = job_ids(home)
    status = status_json(job_id, cli_env)
    assert (status["state"], status["exit_code"]) == ("FAILED", 137)
    assert status["failure_class"]["class"] == "signal" and status["failure_class"]["retryable"] is True
    assert_nothing_running(job_id)


def test_job_file_fields_and_their_checks() -> None:
    base = {"name": "j", "code_dir": "/c", "boot_file": "b.py"}
    spec = spec_from_mapping({**base, "launcher": {"max_restarts": 3, "restart_on": [1, 137]}})
    assert spec.launcher == LauncherOptions(max_restarts=3, restart_on=(1, 137))
    assert spec.launcher.to_dict()["restart_on"] == [1, 137]
    assert spec_from_mapping({**base, "launcher": {"restart_on": "always"}}).launcher.restart_on == "always"
    for bad, where in (
        ({"max_restarts": -1}, "launcher.max_restarts"),
        ({"max_restarts": True}, "launcher.max_restarts"),
        ({"restart_on": "sometimes"}, "launcher.restart_on"),
        ({"restart_on": []}, "launcher.restart_on"),
        ({"restart_on": [0]}, "launcher.restart_on[0]"),
    ):
        with pytest.raises(SpecError) as caught:
            spec_from_mapping({**base, "launcher": bad})
        assert caught.value.field == where
    with pytest.raises(SpecError) as caught:
        spec_from_mapping({**base, "env": {"MA_MAX_RESTARTS": "2"}})
    assert "launcher.max_restarts" in str(caught.value)


def test_local_backend_maps_the_fields_to_the_contract_variables(tmp_path: Path) -> None:
    from malaunch.sdk.backends.local.hostnet import LoopbackNetwork
    from malaunch.sdk.backends.local.plan import plan_local

    code = tmp_path / "code"
    code.mkdir()
    spec = spec_from_mapping(
        {"name": "j", "code_dir": str(code), "boot_file": "b.py", "launcher": {"max_restarts": 2, "restart_on": [3]}}
    )
    net = LoopbackNetwork("j", 1)
    request, _ = plan_local(spec, job_id="j-1", home=str(tmp_path), python="/p/python", network=net)
    env = request.hosts[0].env
    assert (env["MA_MAX_RESTARTS"], env["MALAUNCH_RESTART_ON"]) == ("2", "3")
    plain = spec_from_mapping({"name": "j", "code_dir": str(code), "boot_file": "b.py"})
    request, _ = plan_local(plain, job_id="j-2", home=str(tmp_path), python="/p/python", network=net)
    assert "MA_MAX_RESTARTS" not in request.hosts[0].env


def test_backends_classify_from_an_exit_code_and_a_log_tail(tmp_path: Path) -> None:
    assert classify_job_failure(137)["class"] == "signal"
    tail = ["[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(...)"]
    assert classify_job_failure(1, tail) == {**classify_job_failure(1, tail), "class": "collective_timeout"}
    report = {"failure_class": {"class": "user_error", "retryable": False, "reason": "exit code 2",
                                "description": "..."}}  # fmt: skip
    assert failure_from_report(report, 2)["class"] == "user_error"
    log = tmp_path / "console.log"
    log.write_text("ma-entrypoint: error: MA_NUM_HOSTS='x' is invalid: expected a whole number\n")
    assert failure_from_report(None, 2, str(log))["class"] == "launcher_misuse"
    assert failure_from_report({"failure_class": {"class": "bogus"}}, 137, str(tmp_path / "none"))["class"] == "signal"
