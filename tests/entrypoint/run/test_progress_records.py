"""Each rank's progress records and the time-to-recover records (issue 39), pure: the helper's writer, the
defensive reader, the job's summary, the recovery record's words and the clock fed by the attempt loop and by the
coordinator's book."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from malaunch.entrypoint import checkpoint
from malaunch.entrypoint.report.report import RunResult
from malaunch.entrypoint.run.hosts.bookwatch import clock_watch
from malaunch.entrypoint.run.hosts.jobstate import JobState
from malaunch.entrypoint.run.procs.watch import Round
from malaunch.entrypoint.run.progress import RankProgress, first_progress, newest_attempt, read_progress, summarize
from malaunch.entrypoint.run.recovery import Recovery, read_recovery, recovery_lines
from malaunch.entrypoint.run.recovery_clock import RecoveryClock

T = 1795844400.0  # 2026-11-28 05:40:00 UTC


def _rank(rank: int, step: int, total: int | None = 100, attempt: str = "1.0", when: float = T + 10,
          since: tuple[int, float] = (0, T), host: int | None = None) -> RankProgress:  # fmt: skip
    return RankProgress(rank, step, total, when, since[1], attempt, since[0], since[1], host)


@pytest.fixture
def fresh_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint, "_WINDOW", checkpoint._Window())


@pytest.mark.usefixtures("fresh_window")
def test_progress_without_a_checkpoint_folder_writes_the_ranks_record(tmp_path: Path) -> None:
    env = {"MALAUNCH_PROGRESS_DIR": str(tmp_path / "p"), "RANK": "3", "WORLD_SIZE": "4", "MALAUNCH_ATTEMPT": "2"}
    for step in (1, 2):
        checkpoint.progress(step, 10, environ=env)
    (record,) = read_progress(str(tmp_path / "p"))
    assert (record.rank, record.step, record.total, record.attempt, record.since_step) == (3, 2, 10, "2.0", 1)
    assert record.first == record.since_time <= record.time


@pytest.mark.usefixtures("fresh_window")
def test_progress_with_a_checkpoint_folder_writes_both_records(tmp_path: Path) -> None:
    env = {"MALAUNCH_PROGRESS_DIR": str(tmp_path / "p"), "MALAUNCH_CHECKPOINT_DIR": str(tmp_path / "c")}
    checkpoint.progress(7, environ=env)
    assert [(r.rank, r.step, r.total) for r in read_progress(str(tmp_path / "p"))] == [(0, 7, None)]
    assert [(r.rank, r.step) for r in read_progress(str(tmp_path / "c" / ".progress"))] == [(0, 7)]


@pytest.mark.usefixtures("fresh_window")
def test_progress_with_no_folder_at_all_writes_nothing_and_never_raises(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    checkpoint.progress(1, environ={"MALAUNCH_PROGRESS_DIR": str(tmp_path / "file" / "under")})
    checkpoint.progress(2, environ={"MALAUNCH_CHECKPOINT_DIR": str(tmp_path / "file")})
    checkpoint.progress(3, environ={})
    assert (tmp_path / "file").read_text() == ""


def test_a_step_that_goes_back_starts_a_new_window() -> None:
    window = checkpoint._Window()
    assert window.add(100.0, 5) == (5, 100.0)
    assert window.add(101.0, 6) == (5, 100.0)
    assert window.add(102.0, 2) == (2, 102.0)  # resumed from a checkpoint
    assert window.add(102.5, 3) == (2, 102.0)  # within a second: no new point
    assert window.add(200.0, 9) == (2, 102.0)  # two points at least
    assert window.add(201.0, 10) == (9, 200.0)  # older than the window: dropped
    assert window.first == 100.0
    for second in range(1000):  # a fast loop keeps about one point a second
        window.add(300.0 + second / 100, second)
    assert len(window.points) <= 2 + 31


def test_the_reader_leaves_out_what_is_not_a_record(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    good = {"rank": 1, "step": 4, "total": "x", "time": T, "first": T - 1, "attempt": "0.0", "since": [1, T - 1]}
    (folder / "rank-1.json").write_text(json.dumps(good))
    (folder / "rank-2.json").write_text('{"rank": 2, "step": -1, "time": 1}')
    (folder / "rank-3.json").write_text('{"rank": 3, "st')
    (folder / "rank-4.json").write_text(json.dumps({"step": 9, "time": T, "since": "no"}))  # older: rank by name
    (folder / "other.json").write_text(json.dumps(good))
    found = read_progress(str(folder), host=2)
    assert [(r.rank, r.step, r.total, r.host) for r in found] == [(1, 4, None, 2), (4, 9, None, 2)]
    assert found[0].rate == pytest.approx(3.0) and found[1].rate is None
    assert read_progress(str(tmp_path / "missing")) == []


def test_the_job_is_as_far_as_its_slowest_rank_of_the_newest_attempt() -> None:
    records = [_rank(0, 50, since=(40, T + 5)), _rank(1, 48, since=(38, T + 5)), _rank(2, 90, attempt="0.0")]
    assert [r.rank for r in newest_attempt(records)] == [0, 1]
    found = summarize(records)
    assert found is not None
    assert (found.step, found.total, found.ranks, found.fastest, found.attempt) == (48, 100, 2, 50, "1.0")
    assert found.rate == pytest.approx(2.0) and found.left == pytest.approx(26.0)
    assert summarize([]) is None
    assert summarize([_rank(0, 3, total=None)]).left is None  # type: ignore[union-attr]
    assert first_progress(records, 1) == T + 5 and first_progress(records, 0) == T
    assert first_progress(records, 7) is None


def test_a_recovery_record_in_words_has_every_phase_and_no_none() -> None:
    whole = Recovery(0, T + 0.5, T + 0.75, T + 2.0, T + 3.25)
    assert recovery_lines(whole) == [
        "attempt 0 failure seen    05:40:00.500 UTC",
        "last rank gone            05:40:00.750 UTC (+0.25 s)",
        "attempt 1 started         05:40:02.000 UTC (+1.50 s)",
        "attempt 1 first progress  05:40:03.250 UTC (+2.75 s)",
    ]
    waiting = Recovery(2, T, T + 1, T + 2)
    assert recovery_lines(waiting)[3] == "attempt 3 first progress  not yet: no rank of attempt 3 called progress()"
    ended = Recovery(1, T, T + 1, ended=True)
    assert recovery_lines(ended)[2:] == ["attempt 2 started         never: the job ended without another attempt",
                                         "attempt 2 first progress  never: the job ended without another attempt"]
    data = whole.to_json()
    assert (data["last_rank_gone_after"], data["next_started_after"], data["first_progress_after"]) == (0.25, 1.5, 2.75)
    assert Recovery.from_json(json.loads(json.dumps(data))) == whole
    assert Recovery.from_json({"attempt": 0}) is None and Recovery.from_json([]) is None
    for record in (whole, waiting, ended, Recovery(0, T)):
        assert "None" not in " ".join(recovery_lines(record)) + record.to_json()["line"]


def test_a_next_attempt_that_ended_without_progress_says_never_not_yet() -> None:
    """The next attempt started and ended (its run over) before any rank of it called progress(): its first
    progress will never come, and the record says so by that fact."""
    over = Recovery(0, T, T + 1, T + 2, next_ended=T + 9)
    assert recovery_lines(over)[3] == ("attempt 1 first progress  never: attempt 1 ended without progress (no rank "
                                       "of it called progress())")  # fmt: skip
    assert "not yet" not in over.to_json()["line"]
    assert over.to_json()["next_ended"] == T + 9 and Recovery.from_json(over.to_json()) == over
    assert Recovery.from_json({**over.to_json(), "next_ended": "soon"}) == over._replace(next_ended=None)
    progressed = over._replace(first_progress=T + 3)  # it did progress, then ended: the time, as ever
    assert recovery_lines(progressed)[3] == "attempt 1 first progress  05:40:03.000 UTC (+3.00 s)"


def test_the_clock_notes_when_the_next_attempt_ended_and_a_record_without_progress_is_never(tmp_path: Path) -> None:
    clock = RecoveryClock(str(tmp_path), [str(tmp_path / "progress.d")], print)
    clock.started(0)
    clock.ended(0, _result(time.time() - 0.5))
    clock.started(1)
    assert clock.records[0].next_ended is None
    clock.ended(1, RunResult(0, None, None, 1.0))  # attempt 1 succeeded without a single progress() call
    (record,) = clock.finish()
    assert record.next_ended is not None and record.first_progress is None and not record.ended
    assert record.next_started <= record.next_ended  # type: ignore[operator]
    assert "attempt 1 first progress: never: attempt 1 ended without progress" in record.to_json()["line"]
    (read,) = read_recovery(str(tmp_path / "recovery.json"))
    assert read == record


def test_a_loop_that_ends_while_the_next_attempt_runs_closes_its_record(tmp_path: Path) -> None:
    """finish() with a next attempt started but never reported over (the loop ended it): over too, never."""
    clock = RecoveryClock(str(tmp_path), [], print)
    clock.ended(0, _result(time.time()))
    clock.started(1)
    (record,) = clock.finish()
    assert record.next_ended is not None and "never: attempt 1 ended" in record.to_json()["line"]


def test_a_launchers_own_restart_is_a_record_inside_the_shims_attempt(tmp_path: Path) -> None:
    """torchrun restarts by itself inside the shim's attempt 0: its attempt 0 failed and 1 started (a record,
    "attempt 0.0" -> "attempt 0.1", its first progress from the records of "0.1"); its attempt 1 failed and was
    not restarted: that is the shim's attempt 0 failing, whose record it is, not a launcher's one."""
    clock = RecoveryClock(str(tmp_path), [str(tmp_path / "progress.d")], print)
    now = time.time()
    clock.started(0)
    clock.launcher_rounds(0, [Round(0, now - 9, failed=now - 5)])
    (waiting,) = read_recovery(str(tmp_path / "recovery.json"))  # written at once: status shows it while it runs
    assert (waiting.launcher_attempt, waiting.next_started, waiting.label) == (0, None, "attempt 0.0")
    assert recovery_lines(waiting)[2] == "attempt 0.1 started         not yet: attempt 0.1 waits to start"
    (tmp_path / "progress.d").mkdir()
    (tmp_path / "progress.d" / "rank-0.json").write_text(json.dumps(
        {"rank": 0, "step": 1, "time": now - 1, "first": now - 2, "attempt": "0.1"}))  # fmt: skip
    clock.launcher_rounds(0, [Round(0, now - 9, now - 5, now - 4.5), Round(1, now - 4, now - 0.5, now - 0.4)])
    clock.ended(0, _result(now - 0.5))
    own, shim = clock.finish()
    assert (own.attempt, own.launcher_attempt, own.next_attempt) == (0, 0, 0)
    assert (own.failure_seen, own.last_rank_gone, own.next_started, own.first_progress) == pytest.approx(
        (now - 5, now - 4.5, now - 4, now - 2), abs=0.002)  # fmt: skip
    assert own.to_json()["line"].startswith("attempt 0.0 failure seen: ")
    assert "attempt 0.1 first progress: " in own.to_json()["line"]
    assert (shim.attempt, shim.launcher_attempt, shim.ended) == (0, None, True)
    assert Recovery.from_json(own.to_json()) == own and Recovery.from_json(shim.to_json()) == shim
    assert read_recovery(str(tmp_path / "recovery.json")) == [own, shim]


def _result(seen: float | None) -> RunResult:
    return RunResult(137, None, None, 1.0, seen_at=seen)


def test_one_host_the_clock_records_each_failed_attempt(tmp_path: Path) -> None:
    clock = RecoveryClock(str(tmp_path), [str(tmp_path / "progress.d")], print)
    clock.started(0)
    clock.ended(0, _result(time.time() - 0.5))
    clock.started(1)
    (tmp_path / "progress.d").mkdir()
    (tmp_path / "progress.d" / "rank-0.json").write_text(json.dumps(
        {"rank": 0, "step": 1, "time": time.time() + 1, "first": time.time() + 1, "attempt": "1.0"}))  # fmt: skip
    clock.ended(1, RunResult(0, None, None, 1.0))
    (record,) = clock.finish()
    times = [record.failure_seen, record.last_rank_gone, record.next_started, record.first_progress]
    assert None not in times and times == sorted(times)  # type: ignore[type-var]
    assert read_recovery(str(tmp_path / "recovery.json")) == [record]


def test_a_run_the_shim_was_stopped_in_is_no_failure_to_recover_from(tmp_path: Path) -> None:
    clock = RecoveryClock(str(tmp_path), [], print)
    clock.ended(0, RunResult(143, None, 15, 1.0, seen_at=time.time()))
    assert clock.finish() == [] and not (tmp_path / "recovery.json").exists()


def test_host_0_takes_the_jobs_times_from_the_coordinators_book(tmp_path: Path) -> None:
    """Host 1 is lost before host 0's own ranks see anything: the failure is seen when the book hears of it, and
    the last rank is gone when every account is in, later than host 0's own end."""
    book = JobState(2, 3, True, lambda n: 0.0, host_wait=10.0, join_wait=30.0, now=0.0)
    clock = RecoveryClock(str(tmp_path), [], print)
    watch = clock_watch(clock, lambda state: None)  # what the master's coordinator calls after each change
    conns = [object(), object()]
    for host in (0, 1):
        book.join(host, conns[host], f"10.0.0.{host}", -1, 0.0)
    watch(book)
    clock.started(0)
    book.leave(1, conns[1], "its connection closed", 1.0)
    watch(book)
    heard = clock.books[0].failed
    assert heard is not None and clock.books[0].over is None
    clock.ended(0, _result(time.time() + 60))  # host 0's own sight of it came later
    book.over(0, 0, None, 2.0)
    watch(book)
    over = clock.books[0].over
    assert over is not None
    clock.started(1)
    (record,) = clock.finish()
    assert record.failure_seen == heard and record.last_rank_gone == over
    assert record.failure_seen <= record.last_rank_gone <= record.next_started  # type: ignore[operator]
