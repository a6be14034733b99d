"""The root-cause decision as a pure function: facts in, one decision out (no processes, no clock)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Optional

from malaunch.entrypoint.launchers.torchrun.errors import attempt_of, read_error_files, worker_output_tail
from malaunch.entrypoint.launchers.torchrun.summary import parse_torchrun_failures
from malaunch.entrypoint.report.rootcause import Death, attempt_facts, find_root_cause, name_ranks, teardown_signals

TERM = teardown_signals(launcher_kills=False, escalated=False)
MSRUN = teardown_signals(launcher_kills=True, escalated=False)


def fact(source: str, rank: Optional[int], code: Optional[int], at: Optional[float] = None, seq: int = 0,
         message: Optional[str] = None, index: int = 0, attempt: Optional[int] = None) -> Death:  # fmt: skip
    return Death(source=source, index=index, rank=rank, pid=100 + (rank or 0), code=code, at=at, seq=seq,
                 message=message, attempt=attempt)  # fmt: skip


def chosen(*facts: Death, signals: frozenset = TERM, stopped: bool = False) -> Optional[Death]:
    cause = find_root_cause(facts, signals, stopped=stopped)
    return cause.death if cause is not None else None


def test_nothing_failed_means_no_root_cause() -> None:
    assert chosen() is None
    assert chosen(fact("exit", 0, 0), fact("exit", 1, 0), fact("watch", 2, None, at=1.0)) is None


def test_torchrun_summary_blaming_the_sigterm_victim_loses_to_the_watched_exit() -> None:
    # the race of issue 7.1: torchrun's own summary names rank 0 (-15, our teardown), the watch saw rank 1 exit 7
    cause = chosen(
        fact("watch", 1, 7, at=10.0, seq=0),
        fact("watch", 0, -15, at=10.05, seq=1),
        fact("exit", None, 1, at=10.4, seq=2),
        fact("summary", 0, -15, seq=3),
        fact("summary", 1, 7, seq=4),
    )
    assert cause is not None and (cause.rank, cause.code) == (1, 7)


def test_summary_alone_is_enough_when_the_watch_missed_the_death() -> None:
    cause = chosen(fact("watch", 0, -15, at=1.0, seq=0), fact("exit", None, 1, seq=1), fact("summary", 1, 7, seq=2))
    assert cause is not None and (cause.rank, cause.code, cause.source) == (1, 7, "summary")


def test_sigkill_is_a_root_cause_unless_the_teardown_used_it() -> None:
    facts = (fact("watch", 1, -9, at=5.0, seq=0), fact("watch", 0, -15, at=5.1, seq=1))
    cause = chosen(*facts)
    assert cause is not None and (cause.rank, cause.signal) == (1, 9)
    # msrun kills the peers with SIGKILL: the earliest death still wins among collateral ones
    facts = (fact("watch", 0, -9, at=5.2, seq=0), fact("watch", 1, -9, at=5.0, seq=1))
    cause = chosen(*facts, signals=MSRUN)
    assert cause is not None and cause.rank == 1


def test_earliest_death_wins_by_time_not_by_order_of_recording() -> None:
    # rank 0 failed in gloo *because* rank 1 died 40 ms earlier; the code-1 fact was recorded first
    cause = chosen(fact("watch", 0, 1, at=2.04, seq=0), fact("watch", 1, None, at=2.0, seq=1),
                   fact("summary", 1, 7, seq=2))  # fmt: skip
    assert cause is not None and (cause.rank, cause.code, cause.at) == (1, 7, 2.0)


def test_helper_style_launcher_exit_is_root_cause_only_without_rank_failures() -> None:
    launcher = fact("exit", None, 1, at=3.0)
    cause = chosen(launcher)
    assert cause is not None and cause.rank is None and cause.code == 1
    cause = chosen(launcher, fact("summary", 1, 3, seq=1))
    assert cause is not None and cause.rank == 1


def test_error_file_marks_a_failure_and_lends_its_message() -> None:
    cause = chosen(fact("error_file", 1, None, message="ValueError: boom", seq=0))
    assert cause is not None and (cause.rank, cause.code, cause.message) == (1, 1, "ValueError: boom")
    cause = chosen(fact("summary", 1, 3, seq=0), fact("error_file", 1, None, message="E", seq=1))
    assert cause is not None and (cause.code, cause.message) == (3, "E")


def test_a_stopped_job_has_no_root_cause_from_teardown_deaths_alone() -> None:
    assert chosen(fact("exit", 0, -15, at=1.0), fact("exit", 1, -15, at=1.0), stopped=True) is None
    cause = chosen(fact("exit", 0, 6, at=0.5), fact("exit", 1, -15, at=1.0), stopped=True)
    assert cause is not None and cause.rank == 0


def test_external_sigterm_of_one_rank_is_the_root_cause_when_nothing_else_failed() -> None:
    cause = chosen(fact("watch", 1, -15, at=1.0, seq=0), fact("watch", 0, -15, at=1.2, seq=1))
    assert cause is not None and cause.rank == 1 and cause.signal == signal.SIGTERM


SUMMARY = """
============================================================
rank_job.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-22_20:53:10
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : 7 (pid: 19695)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-22_20:53:10
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 19694)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 19694
============================================================
"""


def test_every_entry_of_torchruns_summary_is_a_fact() -> None:
    entries = parse_torchrun_failures(SUMMARY)
    assert [(e.rank, e.exitcode, e.pid) for e in entries] == [(0, -15, 19694), (1, 7, 19695)]
    facts = [fact("summary", e.rank, e.exitcode, seq=i) for i, e in enumerate(entries)]
    cause = chosen(*facts)
    assert cause is not None and (cause.rank, cause.code) == (1, 7)


def test_each_torchrun_attempt_has_its_own_root_cause() -> None:
    facts = [
        fact("watch", 1, -9, at=1.0, seq=0, attempt=0),  # attempt 0: rank 1 SIGKILLed
        fact("watch", 0, -15, at=1.1, seq=1, attempt=0),  # torchrun stops the rest of the group
        fact("watch", 0, 3, at=5.0, seq=2, attempt=1),  # attempt 1: rank 0 exits 3
        fact("watch", 1, -15, at=5.1, seq=3, attempt=1),
        fact("exit", None, 1, at=6.0, seq=4),  # torchrun itself: belongs to the last attempt
        fact("error_file", 1, None, seq=5, message="ValueError: old", attempt=0),
    ]
    assert [f.seq for f in attempt_facts(facts, 0, last=False)] == [0, 1, 5]
    assert [f.seq for f in attempt_facts(facts, 1, last=True)] == [2, 3, 4]
    first = find_root_cause(attempt_facts(facts, 0, last=False), MSRUN)
    assert first is not None and (first.death.rank, first.death.code, first.death.message) == (1, -9, "ValueError: old")
    last = find_root_cause(attempt_facts(facts, 1, last=True), TERM)
    assert last is not None and (last.death.rank, last.death.code, last.death.message) == (0, 3, None)


def test_error_files_and_worker_output_are_read_per_torchrun_attempt(tmp_path: Path) -> None:
    run = tmp_path / "torchrun" / "none_abc"
    for attempt, text in ((0, "DistNetworkError: The client socket has timed out"), (1, "ValueError: bad lr")):
        local = run / f"attempt_{attempt}" / "1"
        local.mkdir(parents=True)
        (local / "error.json").write_text(json.dumps({"message": {"message": text, "extraInfo": {}}}))
        (local / "stdout.log").write_text(f"attempt {attempt} out\n")
        (local / "stderr.log").write_text(f"attempt {attempt} err\n")
    argv = ["python", "-m", "torch.distributed.run", f"--log_dir={tmp_path / 'torchrun'}", "train.py"]
    records = read_error_files({}, argv, [4, 5], since=0.0)
    assert [(r.rank, r.attempt, r.message) for r in records] == [
        (5, 0, "DistNetworkError: The client socket has timed out"),
        (5, 1, "ValueError: bad lr"),
    ]
    first = str(run / "attempt_0" / "1" / "error.json")
    assert attempt_of(first) == 0 and attempt_of(str(tmp_path / "error.json")) is None
    tail = worker_output_tail(first)
    assert tail == ("attempt 0 out", "attempt 0 err", "DistNetworkError: The client socket has timed out")
    assert worker_output_tail(None) == () and worker_output_tail(str(tmp_path / "gone" / "error.json")) == ()


def msrun_chosen(*facts: Death) -> Optional[Death]:
    cause = find_root_cause(facts, MSRUN, launcher_kills=True)
    return cause.death if cause is not None else None


def test_msrun_line_names_a_worker_the_watch_missed_by_elimination() -> None:
    # rank 1 (pid 501) exited 3 between two looks of a busy watch; msrun logged it, then SIGKILLed rank 0
    facts = [
        Death("summary", 0, None, 501, 3, at=7.0, seq=0),
        Death("watch", 0, 0, 500, -9, at=7.1, seq=1),
        Death("exit", 0, None, 400, 1, at=8.0, seq=2),
    ]
    named = name_ranks(facts, {500: 0}, [0, 1])
    assert [f.rank for f in named] == [1, 0, None]
    cause = msrun_chosen(*named)
    assert cause is not None and (cause.rank, cause.code, cause.pid) == (1, 3, 501)
    # even with no rank known the line outranks msrun's SIGKILL of rank 0 (main named rank 0, exit 137)
    cause = msrun_chosen(*facts)
    assert cause is not None and (cause.rank, cause.code) == (None, 3)


def test_name_ranks_guesses_only_when_one_rank_and_one_pid_are_unknown() -> None:
    line = Death("summary", 0, None, 501, 3, seq=0)
    assert name_ranks([line], {}, [0, 1])[0].rank is None  # two ranks unseen: which one?
    assert name_ranks([line], {501: 1}, [0, 1])[0].rank == 1  # the watch saw it
    assert name_ranks([line, line.replace(pid=502, seq=1)], {500: 0}, [0, 1, 2])[0].rank is None
    watch = Death("watch", 0, None, 777, -9, seq=2)  # only launcher lines get a rank
    assert name_ranks([watch], {500: 0}, [0, 1])[0].rank is None


def test_msrun_sigkill_is_collateral_only_after_msruns_line_and_never_for_the_worker_it_names() -> None:
    # rank 1 SIGKILLed from outside, msrun logged it and SIGKILLed rank 0: both died of SIGKILL in one look
    one_look = (fact("watch", 0, -9, at=5.0, seq=0), fact("watch", 1, -9, at=5.0, seq=1))
    cause = msrun_chosen(*one_look, fact("summary", 1, -9, at=5.01, seq=2))
    assert cause is not None and cause.rank == 1
    # no msrun line: msrun killed nobody; the shim's SIGTERM ended rank 0 after rank 1's SIGKILL
    cause = msrun_chosen(fact("watch", 0, -15, at=5.0, seq=0), fact("watch", 1, -9, at=5.0, seq=1))
    assert cause is not None and cause.rank == 1
    # a worker msrun did not name died of SIGKILL after the line: msrun's teardown, never the root cause
    cause = msrun_chosen(fact("watch", 0, -9, at=4.0, seq=0), fact("summary", 1, 3, at=5.0, seq=1))
    assert cause is not None and (cause.rank, cause.code) == (1, 3)
    # once the shim's own teardown escalated to SIGKILL every SIGKILL is collateral again
    cause = find_root_cause((fact("watch", 0, -9, at=4.0, seq=0), fact("watch", 1, 3, at=5.0, seq=1)), MSRUN)
    assert cause is not None and cause.death.rank == 1
