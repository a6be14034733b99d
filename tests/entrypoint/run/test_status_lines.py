"""The shim's progress and recovery lines on its console (issue 39: what a cloud job's ``status`` reads of its log):
their one form, read back exactly; a rank that prints the tag, a line cut short or damaged is never taken; a line
stays within one atomic pipe write; the beacon says a host's progress at a bounded rate; and a real shim's console
says what its record files say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

import pytest
from malaunch.entrypoint.run.beacon import CHECK_EVERY, ProgressBeacon
from malaunch.entrypoint.run.progress import RankProgress, read_progress, record_text
from malaunch.entrypoint.run.recovery import Recovery, read_recovery
from malaunch.entrypoint.run.statuslines import (
    MAX_LINE,
    PROGRESS_EVERY,
    SHIM_PREFIX,
    progress_text,
    read_status_lines,
    recovery_text,
)
from shimutil import SCRIPTS, marked_env, shim, write_v10_table

T = 1795844400.0
RANKS = (RankProgress(0, 120, 1000, T + 60, T + 1, "1.0", 90, T + 30), RankProgress(1, 118, None, T + 59.5, T + 1.25,
         "1.0", 88, T + 29.5))  # fmt: skip
RECOVERY = (Recovery(0, T - 5.0, T - 4.75, T - 3.5, T + 1.0), Recovery(1, T + 70.0, T + 70.5, ended=True))


def line(text: str) -> str:
    return SHIM_PREFIX + text


def progress_line(records: object = RANKS) -> str:
    text = progress_text(records)  # type: ignore[arg-type]
    assert text is not None
    return line(text)


def recovery_line(records: object = RECOVERY) -> str:
    text = recovery_text(records)  # type: ignore[arg-type]
    assert text is not None
    return line(text)


def test_the_lines_are_read_back_exactly_with_the_host_of_the_log() -> None:
    found = read_status_lines(["[rank 0] step 1", progress_line(), recovery_line()], host=3)
    assert found.progress == tuple(record._replace(host=3) for record in RANKS)
    assert found.recovery == RECOVERY
    assert progress_line().startswith('[ma-entrypoint] progress/v1 {"ranks":[[0,120,1000,')


def test_the_newest_good_line_of_each_kind_wins() -> None:
    older = progress_line((RANKS[0]._replace(step=100),))
    lines = [older, recovery_line(RECOVERY[:1]), progress_line(), "[rank 1] more", recovery_line()]
    found = read_status_lines(lines)
    assert (found.progress, found.recovery) == (RANKS, RECOVERY)


@pytest.mark.parametrize("bad", [
    "[rank 0] " + progress_line((RANKS[0]._replace(step=999),)),  # a rank that prints the tag: behind its prefix
    "[ma-entrypoint]  progress/v1 {}",
    progress_line()[:-7],  # cut short at the tail
    progress_line().replace("[[0,120", "[[0,-120"),  # a value no record has
    progress_line().replace("[[0,120", "[[0,120,7"),  # a row of another length
    line('progress/v1 {"ranks":[]}'),
    line("progress/v1 []"),
    line("progress/v2 " + progress_line().split(" ", 2)[2]),  # another version: not read as this one
    progress_line() + "x" * MAX_LINE * 2,
    "\x00\xff" + progress_line(),
])  # fmt: skip
def test_a_line_that_is_not_the_shims_own_or_not_whole_is_passed_over(bad: str) -> None:
    older = progress_line((RANKS[0]._replace(step=7),))
    assert read_status_lines([older, bad]).progress == (RANKS[0]._replace(step=7),)
    assert read_status_lines([bad]).progress == ()


@pytest.mark.parametrize("bad", [recovery_line()[:-3], recovery_line().replace("[[0,", "[[-1,"),
                                 recovery_line().replace("[[0,", "[[0,null,"), line("recovery/v1 {}")])
def test_a_damaged_recovery_line_is_passed_over(bad: str) -> None:
    assert read_status_lines([recovery_line(RECOVERY[:1]), bad]).recovery == RECOVERY[:1]
    assert read_status_lines([bad]).recovery == ()


def test_the_line_carries_numbers_and_the_attempt_only() -> None:
    data = json.loads(progress_line().split(" ", 2)[2])
    assert data == {"ranks": [[0, 120, 1000, T + 60, T + 1, "1.0", 90, T + 30],
                              [1, 118, None, T + 59.5, T + 1.25, "1.0", 88, T + 29.5]]}  # fmt: skip
    assert json.loads(recovery_line().split(" ", 2)[2]) == {
        "recovery": [[0, T - 5.0, T - 4.75, T - 3.5, T + 1.0, 0, None, None],
                     [1, T + 70.0, T + 70.5, None, None, 1, None, None]]}


def test_the_recovery_line_keeps_next_ended_and_torchruns_own_round() -> None:
    record = Recovery(2, T, T + 0.5, T + 1.0, None, True, T + 9.0, 1)
    line = f"[ma-entrypoint] {recovery_text([record])}"
    assert read_status_lines([line]).recovery == (record,)
    six = '[ma-entrypoint] recovery/v1 {"recovery":[[2,' + f"{T},{T + 0.5}" + ',null,null,1]]}'  # an older shim's
    assert read_status_lines([six]).recovery == (Recovery(2, T, T + 0.5, None, None, True, None, None),)


def test_a_host_with_too_many_ranks_for_one_line_lists_its_slowest() -> None:
    many = [RankProgress(rank, 5000 - rank, 10**9, T + rank, T, "12.3", 4000, T) for rank in range(300)]
    text = progress_line(many)
    assert len(text.encode()) + 1 <= MAX_LINE  # with its newline: one atomic pipe write
    found = read_status_lines([text]).progress
    assert 20 < len(found) < 300
    assert [record.rank for record in found] == sorted(record.rank for record in found)
    assert min(record.step for record in found) == 5000 - 299  # the slowest rank is kept: the job's step is right
    assert {record.rank for record in found} == set(range(300 - len(found), 300))


def test_only_the_newest_attempt_goes_into_the_line() -> None:
    old = RankProgress(2, 50, 1000, T, T, "0.0", 40, T - 10)
    assert read_status_lines([progress_line((*RANKS, old))]).progress == RANKS
    assert progress_text(()) is None and recovery_text(()) is None


# -- the beacon -----------------------------------------------------------------------------------------------------
def write(folder: Path, rank: int, step: int, attempt: str = "0.0") -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"rank-{rank}.json").write_text(record_text(rank, step, 100, T + step, T, attempt, (0, T)))


def test_the_beacon_says_a_hosts_progress_at_a_bounded_rate(tmp_path: Path) -> None:
    folder = tmp_path / "progress.d"
    write(folder, 0, 3, "0.0")  # an earlier attempt's record: not said again
    said: List[str] = []
    beacon = ProgressBeacon(str(folder), said.append, now=0.0)
    beacon.look(CHECK_EVERY)
    assert said == []
    write(folder, 0, 1, "1.0")
    beacon.look(CHECK_EVERY / 2)  # too soon after the last read: the folder is not read
    beacon.look(2 * CHECK_EVERY)  # an attempt's first record: at once
    assert [read_status_lines([line(text)]).progress[0].step for text in said] == [1]
    for step, now in ((2, 3.0), (3, 10.0), (4, PROGRESS_EVERY)):  # changed, but within PROGRESS_EVERY of the last
        write(folder, 0, step, "1.0")
        beacon.look(now)
    assert len(said) == 1
    beacon.look(2 * CHECK_EVERY + PROGRESS_EVERY)  # the rest of the interval is over: the newest step
    assert [read_status_lines([line(text)]).progress[0].step for text in said] == [1, 4]
    beacon.look(3 * PROGRESS_EVERY)  # nothing changed: nothing said
    write(folder, 0, 5, "1.0")
    beacon.finish(3 * PROGRESS_EVERY + 1)  # the run ends: its last change, however recent the line before
    beacon.finish(3 * PROGRESS_EVERY + 2)
    assert [read_status_lines([line(text)]).progress[0].step for text in said] == [1, 4, 5]


def test_the_beacon_reads_nothing_without_a_progress_folder(tmp_path: Path) -> None:
    said: List[str] = []
    missing = str(tmp_path / "missing")
    for beacon in (ProgressBeacon.of({}, said.append, 0.0), ProgressBeacon(missing, said.append, 0.0)):
        beacon.look(10.0)
        beacon.finish(11.0)
    assert said == []


# -- a real shim ----------------------------------------------------------------------------------------------------
@pytest.mark.process
def test_a_real_shims_console_says_what_its_record_files_say(tmp_path: Path) -> None:
    write_v10_table(tmp_path / "table.json", servers=1, devices=2)
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_GRACE_PERIOD": "3",
                      "MALAUNCH_LOG_DIR": str(tmp_path / "logs"), "MALAUNCH_RESTART_BACKOFF": "0.2",
                      "STEP_PACE": "0.02", "STEP_PRINT": "1", "MA_MAX_RESTARTS": "1", "FAIL_RANK": "1",
                      "FAIL_STEP": "3"})  # fmt: skip
    done = shim([str(SCRIPTS / "progress_steps.py"), "6", "6"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    found = read_status_lines(done.stderr.splitlines(), host=0)
    assert found.progress == tuple(read_progress(str(tmp_path / "logs" / "progress.d"), host=0))
    assert [(r.step, r.attempt) for r in found.progress] == [(6, "1.0"), (6, "1.0")]
    assert found.recovery == tuple(read_recovery(str(tmp_path / "logs" / "recovery.json")))
    assert found.recovery[0].first_progress is not None
    ours = [text for text in done.stderr.splitlines() if text.startswith(("[ma-entrypoint] progress/",
                                                                          "[ma-entrypoint] recovery/"))]  # fmt: skip
    assert len(ours) <= 8, ours  # a bounded number, not a line per step
    assert not [text for text in done.stdout.splitlines() if "[ma-entrypoint]" in text]
