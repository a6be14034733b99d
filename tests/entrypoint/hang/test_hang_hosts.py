"""Hangs in a multi-host job (issue 26), as in a cluster: one real shim per emulated host, host 0's serving the
job's coordinator. A hang is the job's: every host's ranks silent. Then every host ends its attempt with class
``hang``, the job restarts (``MA_MAX_RESTARTS=1``, ``restart_on: retryable``) and succeeds in attempt 1; the
report names the rank that is not where the others are."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from hostsutil import Hosts, job_causes

pytestmark = pytest.mark.process

HANG = {"MALAUNCH_HANG_TIMEOUT": "3", "MA_MAX_RESTARTS": "1"}


def _job(made: list[Hosts], tmp: Path, plan: str, **extra: str) -> Hosts:
    job = Hosts(tmp, 2, {"HANG_PLAN": plan, "HANG_JOB_DIR": str(tmp), **extra}, script="hang_job.py")
    made.append(job)
    return job


def _hung_then_ok(job: Hosts) -> Dict[str, Any]:
    assert [job.wait(0), job.wait(1)] == [0, 0], job.console(0) + job.console(1)
    for index in (0, 1):
        report = job.report(index)
        first, second = report["attempts"]
        assert (first["failure_class"], first["exit_code"], first["restarted"]) == ("hang", 124, True)
        assert first["hang"] and first["hang"][0]["last_line"].startswith(f"host {index} attempt 0")
        assert second["exit_code"] == 0
        assert "every host starts attempt 1" in job.console(index)
    cause = job_causes(job.report(0))[0]
    assert cause is not None and cause == job_causes(job.report(1))[0]
    return cause


@pytest.mark.parametrize(("action", "state"), [("stop", "stopped"), ("spin", "running")])
def test_a_stopped_or_spinning_rank_is_found_named_and_the_job_restarted(
    hosts: list[Hosts], tmp_path: Path, action: str, state: str
) -> None:
    job = _job(hosts, tmp_path, f"0:0=sleep,0:1={action}", **HANG).start_all()
    cause = _hung_then_ok(job)
    assert (cause["host"], cause["kind"], cause["code"]) == (1, "hang", 124)
    assert "not where the others are" in str(cause["tail"]) or "the only rank of this host" in str(cause["tail"])
    rank = job.report(1)["attempts"][0]["hang"][0]
    assert rank["state"] == state
    assert job.report(0)["attempts"][0]["hang"][0]["state"] == "sleeping"
    assert "py-spy" in rank["stack_note"] and rank["stack"] is None


def test_a_rank_blocked_reading_a_pipe_is_found_and_the_job_restarted(hosts: list[Hosts], tmp_path: Path) -> None:
    job = _job(hosts, tmp_path, "0:0=pipe,0:1=pipe", **HANG).start_all()
    cause = _hung_then_ok(job)
    assert cause["kind"] == "hang"
    assert job.report(1)["attempts"][0]["hang"][0]["state"] == "sleeping"


def test_one_silent_host_is_not_a_hang_while_the_other_prints(hosts: list[Hosts], tmp_path: Path) -> None:
    job = _job(hosts, tmp_path, "0:0=quiet,0:1=chatty", HANG_SECONDS="9", **HANG).start_all()
    assert [job.wait(0), job.wait(1)] == [0, 0]
    for index in (0, 1):
        assert [a["attempt"] for a in job.report(index)["attempts"]] == [0]
        assert "hung" not in job.console(index)


def test_ranks_that_touch_their_progress_file_are_left_alone(hosts: list[Hosts], tmp_path: Path) -> None:
    job = _job(hosts, tmp_path, "0:0=progress,0:1=progress", HANG_SECONDS="9", **HANG).start_all()
    assert [job.wait(0), job.wait(1)] == [0, 0]
    for index in (0, 1):
        assert [a["attempt"] for a in job.report(index)["attempts"]] == [0]
        assert "hung" not in job.console(index)


def test_off_nothing_is_watched(hosts: list[Hosts], tmp_path: Path) -> None:
    job = _job(hosts, tmp_path, "0:0=quiet,0:1=quiet", HANG_SECONDS="5", MA_MAX_RESTARTS="1").start_all()
    assert [job.wait(0), job.wait(1)] == [0, 0]
    for index in (0, 1):
        assert [a["attempt"] for a in job.report(index)["attempts"]] == [0]
        assert "hung" not in job.console(index)


def _method(method: str, tmp: Path) -> Dict[str, str]:
    from shimutil import free_port, write_v10_table

    if method == "ranktable":
        write_v10_table(tmp / "table.json", servers=2, devices=2)
        return {"MA_RUN_METHOD": "ranktable", "RANK_TABLE_FILE": str(tmp / "table.json"),
                "MALAUNCH_MASTER_PORT": str(free_port())}  # fmt: skip
    return {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2", "MA_TORCHRUN_MASTER_PORT": str(free_port())}


@pytest.mark.parametrize(
    ("method", "action", "state"),
    [("ranktable", "stop", "stopped"), ("ranktable", "spin", "running"),
     pytest.param("torchrun", "stop", "stopped", marks=pytest.mark.torch)],
)  # fmt: skip
def test_the_report_names_the_rank_that_is_not_where_the_others_are(
    hosts: list[Hosts], tmp_path: Path, method: str, action: str, state: str
) -> None:
    job = _job(hosts, tmp_path, f"0:0=sleep,0:1=sleep,0:1:3={action}", **HANG, **_method(method, tmp_path))
    job.start_all()
    assert [job.wait(0, timeout=300), job.wait(1, timeout=300)] == [0, 0], job.console(0) + job.console(1)
    for index in (0, 1):
        report = job.report(index)
        first = report["attempts"][0]
        assert (first["failure_class"], first["restarted"]) == ("hang", True)
        cause = job_causes(report)[0]  # the job's root cause, the same on every host
        assert cause is not None and (cause["host"], cause["rank"], cause["name"]) == (1, 3, "rank 3")
    assert job.report(1)["attempts"][0]["root_cause"]["name"] == "rank 3"  # host 1's own account
    ranks = {entry["rank"]: entry for entry in job.report(1)["attempts"][0]["hang"]}
    assert ranks["rank 3"]["state"] == state and ranks["rank 2"]["state"] == "sleeping"
    assert ranks["rank 3"]["last_line"] == f"host 1 attempt 0: {action} (rank 3)"
    assert "rank 3 is not where the others are" in job.console(1)


def _hung_on_host_1(job: Hosts, rank: Optional[int]) -> None:
    """Host 1 (``rank``) is the job's root cause on both hosts; host 0, whose ranks ended, was not hung itself."""
    for index in (0, 1):
        first = job.report(index)["attempts"][0]
        assert first["restarted"] is True and "every host starts attempt 1" in job.console(index)
        cause = job_causes(job.report(index))[0]
        assert cause is not None
        assert (cause["host"], cause["kind"], cause["code"], cause["rank"]) == (1, "hang", 124, rank)
    assert job.report(1)["attempts"][0]["failure_class"] == "hang"
    assert not job.report(0)["attempts"][0].get("hang") and "hang root cause on this host" not in job.console(0)


def test_a_host_silent_while_the_other_ends_is_hung_when_the_other_is_over(hosts: list[Hosts], tmp_path: Path) -> None:
    """Host 1 went silent while host 0 still printed; host 0's ranks then succeed: host 1 is hung at once (it was
    never looked at again on the old code: the job waited for host 1's rank to end)."""
    job = _job(hosts, tmp_path, "0:0=chatty,0:1=sleep", HANG_SECONDS="9", **HANG).start_all()
    assert [job.wait(0, timeout=120), job.wait(1, timeout=120)] == [0, 0], job.console(0) + job.console(1)
    _hung_on_host_1(job, None)


@pytest.mark.slow
@pytest.mark.torch
def test_a_hang_is_found_while_the_other_hosts_torchrun_waits_in_its_exit_barrier(
    hosts: list[Hosts], tmp_path: Path
) -> None:
    """Issue 44 item 1: host 0's ranks succeed and its torchrun waits in its exit barrier for host 1 (up to 300 s),
    whose rank 3 hangs. Host 0 says its ranks ended: the hang is the job's after MALAUNCH_HANG_TIMEOUT, not after
    the barrier (on the old code host 0 was neither silent nor over for those 300 s)."""
    job = _job(hosts, tmp_path, "0:1:3=sleep", **HANG, **_method("torchrun", tmp_path)).start_all()
    assert [job.wait(0, timeout=150), job.wait(1, timeout=150)] == [0, 0], job.console(0) + job.console(1)
    _hung_on_host_1(job, 3)
    assert "rank 3" in job.report(1)["attempts"][0]["root_cause"]["name"]


def test_hung_hosts_with_equal_evidence_name_the_lowest_rank_and_say_so_on_every_host(
    hosts: list[Hosts], tmp_path: Path
) -> None:
    """Rank 3 exits 0 at once and every other rank waits (the rank-table fan-out, 2 ranks per host, no restart):
    each host names a waiting rank with no evidence. The job's root cause is host 0's (the lowest rank), not the
    one of the host that reported first (either, on the old code), and every host's summary says the evidence was
    equal on the shim's own line (``chosen``), never among the rank's output (``|`` lines: where the note was, a
    line the rank never wrote); the report keeps it in the job's cause (``why``)."""
    job = _job(hosts, tmp_path, "0:0=sleep,0:1=sleep,0:1:3=ok", MALAUNCH_HANG_TIMEOUT="3",
               **_method("ranktable", tmp_path)).start_all()  # fmt: skip
    assert [job.wait(0), job.wait(1)] == [124, 124], job.console(0) + job.console(1)
    for index in (0, 1):
        cause = job_causes(job.report(index))[0]
        assert cause is not None and (cause["host"], cause["kind"]) == (0, "hang") and cause["rank"] in (0, 1), cause
        summary = job.console(index).partition("The job failed")[2].splitlines()
        assert "Root cause: rank " in summary[0], job.console(index)
        chosen = [line for line in summary if "evidence is equal" in line]
        assert chosen == ["  chosen    : the hung hosts' evidence is equal (hosts 0, 1): the lowest rank they name is "
                          "the job's root cause, not the one of the host that reported first"], summary  # fmt: skip
        assert cause["why"] == chosen[0].partition(": ")[2] and not any("evidence" in line for line in cause["tail"])
    ranks = {entry["rank"]: entry["state"] for entry in job.report(1)["attempts"][0]["hang"]}
    assert ranks == {"rank 2": "sleeping", "rank 3": "exited"}, ranks
