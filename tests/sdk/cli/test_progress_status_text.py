"""``ma-submit status``'s progress and recovery lines and ``top``'s steps per rank (issue 39), pure: exact lines
from fixed records and a fixed clock."""

from __future__ import annotations

from malaunch.entrypoint.public import RankProgress, Recovery
from malaunch.sdk.backends.inside import HostUsage, UsageReport
from malaunch.sdk.cli.actions import render_status
from malaunch.sdk.cli.inside import render_usage
from malaunch.sdk.progress_text import duration_text, progress_line, rate_text
from malaunch.sdk.status import HostState, HostStatus, JobState, JobStatus

T = 1795844400.0  # 2026-11-28 05:40:00 UTC
RANKS = (
    RankProgress(0, 120, 1000, T + 60, T + 1, "1.0", 90, T + 30, 0),
    RankProgress(1, 118, 1000, T + 59, T + 1, "1.0", 88, T + 29, 1),
)
RECOVERY = (Recovery(0, T - 5.0, T - 4.75, T - 3.5, T + 1.0),)


def _status(state: JobState, **fields: object) -> JobStatus:
    hosts = tuple(HostStatus(index, f"127.0.0.{index + 1}", HostState.RUNNING, pid=11 + index) for index in (0, 1))
    return JobStatus(id="job-1", backend="local", state=state, hosts=hosts, location="/jobs/job-1",
                     **fields)  # type: ignore[arg-type]  # fmt: skip


def test_status_of_a_running_job_says_step_rate_time_left_and_the_recovery() -> None:
    text = render_status(_status(JobState.RUNNING, progress=RANKS, recovery=RECOVERY), now=T + 62)
    assert text.splitlines()[-6:] == [
        "progress:  step 118 of 1000 (2 ranks of attempt 1; the fastest at 120), 1.00 steps/s, about 14 min 42 s "
        "left, recorded 2 s ago",
        "recovery after attempt 0:",
        "  attempt 0 failure seen    05:39:55.000 UTC",
        "  last rank gone            05:39:55.250 UTC (+0.25 s)",
        "  attempt 1 started         05:39:56.500 UTC (+1.50 s)",
        "  attempt 1 first progress  05:40:01.000 UTC (+6.00 s)",
    ]


def test_status_says_a_launchers_own_restart_by_its_attempts_inside_the_shims() -> None:
    own = Recovery(0, T - 5.0, T - 4.75, T - 3.5, None, launcher_attempt=0)
    text = render_status(_status(JobState.RUNNING, progress=RANKS, recovery=(own,)), now=T + 62)
    assert text.splitlines()[-5:] == [
        "recovery after attempt 0.0 (the launcher's own restart):",
        "  attempt 0.0 failure seen    05:39:55.000 UTC",
        "  last rank gone              05:39:55.250 UTC (+0.25 s)",
        "  attempt 0.1 started         05:39:56.500 UTC (+1.50 s)",
        "  attempt 0.1 first progress  not yet: no rank of attempt 0.1 called progress()",
    ]


def test_status_of_an_ended_job_says_how_far_it_got() -> None:
    text = render_status(_status(JobState.SUCCEEDED, progress=RANKS), now=T + 3600)
    assert text.splitlines()[-1] == ("progress:  step 118 of 1000 (2 ranks of attempt 1; the fastest at 120), the "
                                     "last recorded 59 min 0 s ago")  # fmt: skip


def test_status_without_records_has_no_progress_line_and_json_says_null() -> None:
    status = _status(JobState.RUNNING)
    assert "progress" not in render_status(status, now=T) and "recovery" not in render_status(status, now=T)
    assert (status.to_json()["progress"], status.to_json()["recovery"]) == (None, [])


def test_status_json_has_the_summary_each_rank_and_the_recovery_record() -> None:
    data = _status(JobState.RUNNING, progress=RANKS, recovery=RECOVERY).to_json()
    assert {key: data["progress"][key] for key in ("step", "total", "ranks", "fastest", "rate", "seconds_left")} == {
        "step": 118, "total": 1000, "ranks": 2, "fastest": 120, "rate": 1.0, "seconds_left": 882.0}  # fmt: skip
    assert [(r["rank"], r["host"], r["step"]) for r in data["progress"]["per_rank"]] == [(0, 0, 120), (1, 1, 118)]
    assert data["recovery"][0]["first_progress_after"] == 6.0


def test_words_for_what_is_not_known() -> None:
    one = (RankProgress(0, 1, None, T, T, "0.0", 1, T, None),)
    assert progress_line(one, True, T) == ("step 1 (1 rank of attempt 0), rate not known yet (one step recorded), "
                                           "time left not known (no total given to progress()), recorded 0 s ago")
    assert progress_line((), True, T) is None
    assert [rate_text(0.05), rate_text(12.5)] == ["3.00 steps/min", "12.50 steps/s"]
    assert [duration_text(x) for x in (4.4, 65, 7300)] == ["4 s", "1 min 5 s", "2 h 1 min"]


def test_top_shows_the_step_of_each_rank() -> None:
    report = UsageReport("job-1", (HostUsage(0, "127.0.0.1", cpu_cores=1.5, memory_bytes=1 << 20, processes=3),),
                         source="/proc", ranks=RANKS)  # fmt: skip
    assert render_usage(report).splitlines()[2:] == [
        "",
        "RANK  HOST  STEP      RATE          ATTEMPT",
        "0     0     120/1000  1.00 steps/s  1",
        "1     1     118/1000  1.00 steps/s  1",
        "(from /proc)",
    ]
    assert [(r["rank"], r["step"], r["rate"]) for r in report.to_json()["ranks"]] == [(0, 120, 1.0), (1, 118, 1.0)]
