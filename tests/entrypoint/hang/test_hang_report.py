"""The hang report (run/hang_report.py): which rank is not where the others are (pure), and py-spy's stack, or a
clear note when there is none."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Optional

from malaunch.entrypoint.run.hang_report import RankHang, judge, look_ranks, py_spy_stack, stand_out, state_name


def _rank(name: str, state: str = "sleeping", cpu: Optional[float] = 0.0, silent: Optional[float] = 5.0) -> RankHang:
    return RankHang(name, 100, state, cpu, silent, f"{name} step 7", None, "py-spy is not on PATH")


def test_state_letters_read_in_words() -> None:
    assert [state_name(c) for c in ("R", "S", "D", "T", "Z", None)] == [
        "running", "sleeping", "disk wait", "stopped", "zombie", "gone"]  # fmt: skip


def test_a_stopped_rank_stands_out_from_sleeping_ones() -> None:
    ranks = [_rank("rank 0"), _rank("rank 1", "stopped", silent=4.0), _rank("rank 2")]
    chosen, score, why = stand_out(ranks, 5.0)
    assert chosen is not None and chosen.rank == "rank 1" and score > 0
    assert why == "rank 1 is not where the others are: it is stopped while the other ranks of this host are sleeping"


def test_a_rank_spinning_alone_stands_out_and_the_stopped_one_wins_over_it() -> None:
    spinning = [_rank("rank 0"), _rank("rank 1", "running", cpu=4.5)]
    chosen, _, why = stand_out(spinning, 5.0)
    assert chosen is not None and chosen.rank == "rank 1" and "spinning: it used 4.5 s of CPU" in why
    chosen, _, _ = stand_out([*spinning, _rank("rank 2", "stopped")], 5.0)
    assert chosen is not None and chosen.rank == "rank 2"


def test_with_no_evidence_the_rank_silent_longest_is_named_and_the_report_says_so() -> None:
    ranks = [_rank("rank 0", silent=3.0), _rank("rank 1", silent=9.0), _rank("rank 2", silent=None)]
    chosen, score, why = stand_out(ranks, 5.0)
    assert chosen is not None and chosen.rank == "rank 1" and score == 0
    assert "no rank stands out" in why and "silent longest" in why


def test_waiting_ranks_silent_within_a_look_of_each_other_are_equal_and_the_lowest_is_named() -> None:
    """Every rank waits; their last outputs were seen within two looks at the logs of each other (``grain``: the
    longest time between two looks): which came first is arrival timing, so the lowest rank is named, as between
    hosts. A rank whose last output came more than two looks before the others' is silent longest, a fact."""
    ranks = [_rank("rank 2", silent=4.0), _rank("rank 0", silent=3.5), _rank("rank 1", silent=4.5)]
    chosen, score, why = stand_out(ranks, 5.0, grain=1.0)
    assert chosen is not None and chosen.rank == "rank 0" and score == 0
    assert why == ("no rank stands out (none stopped, in disk wait or spinning: all wait); ranks 0, 1, 2 were silent "
                   "equally long (their last output came within two looks at the logs (2.0 s) of each other): the "
                   "lowest is named")  # fmt: skip
    chosen, _, why = stand_out([*ranks, _rank("rank 3", silent=6.6)], 5.0, grain=1.0)
    assert chosen is not None and chosen.rank == "rank 3" and why.endswith("the one silent longest is named")
    chosen, _, why = stand_out([_rank("rank 1", "stopped", silent=3.0), _rank("rank 0", "stopped", silent=3.5),
                                _rank("rank 2")], 5.0, grain=0.6)  # fmt: skip
    assert chosen is not None and chosen.rank == "rank 0"
    assert why.startswith("2 ranks show the same evidence (it is stopped); ranks 0, 1 were silent equally long")
    hung = judge(ranks, 5.0, "h", {}, "ma-entrypoint: hung", grain=1.0)
    assert (hung.failure.rank, hung.failure.why) == (0, stand_out(ranks, 5.0, grain=1.0)[2])


def test_a_rank_that_exited_with_code_0_is_never_the_cause_while_another_runs() -> None:
    """Under torchrun rank 2 printed and succeeded; rank 3 sleeps, silent since: rank 3 is named, not the rank
    silent longest (rank 2, whose process is gone)."""
    ranks = [_rank("rank 2", "exited", cpu=None, silent=9.0), _rank("rank 3", silent=4.0)]
    chosen, score, why = stand_out(ranks, 5.0)
    assert chosen is not None and chosen.rank == "rank 3" and score == 0
    assert why == "the only rank of this host that did not exit: it is sleeping"
    looked = look_ranks({2: 1.0, 3: 1.0}, {}, {2: 4242, 3: os.getpid()}, {}, 2.0, succeeded={4242})
    assert (looked[0].state, looked[0].note) == ("exited", "it exited with code 0")
    assert looked[0].line() == "hang report: rank 2 (pid 4242): exited with code 0, last output 1.0 s ago: ''"


def test_a_rank_whose_process_was_never_seen_is_reported_without_a_pid_of_none() -> None:
    """Under torchrun a worker that printed and exited within the watch's first look has no pid: its hang report
    line says so, never "(pid None)" (seen in 2 of 3 runs of a torchrun job whose last rank exits 0 at once)."""
    looked = look_ranks({0: 1.0, 1: 1.0}, {}, {0: os.getpid()}, {1: "rank 1 up"}, 2.0)
    line = looked[1].line()
    assert "None" not in line
    assert line.startswith("hang report: rank 1 (pid unknown): not seen, CPU unknown")
    assert looked[1].note == "the shim never saw its process"
    assert looked[0].line().startswith(f"hang report: rank 0 (pid {os.getpid()}): ")


def test_a_rank_never_seen_is_not_the_cause_while_a_seen_rank_waits() -> None:
    """A torchrun job whose rank 1 printed and exited 0 before the worker watch's first look, while rank 0 waits
    forever: rank 0 is named, as when the watch saw rank 1 exit with 0 (and as under the rank-table fan-out);
    before, the unseen rank was taken for a process seen to vanish ("gone", strong evidence) and named in 2 of 3
    runs. With no rank seen at all, nothing is evidence."""
    looked = look_ranks({0: 1.0, 1: 1.0}, {}, {0: os.getpid()}, {0: "rank 0 up", 1: "rank 1 up"}, 2.0)
    chosen, score, why = stand_out(looked, 1.0)
    assert chosen is not None and chosen.rank == "rank 0" and score == 0
    assert why.startswith("the only rank of this host that did not exit")
    unseen = look_ranks({0: 1.0, 1: 1.5}, {}, {}, {}, 2.0)
    chosen, score, why = stand_out(unseen, 1.0)
    assert chosen is not None and chosen.rank == "rank 0" and score == 0 and "no rank stands out" in why


def test_the_verdict_names_the_rank_and_its_tail_classifies_as_hang() -> None:
    from malaunch.entrypoint.report.failure_class import classify_failure

    line = "ma-entrypoint: hung: no rank of this host wrote output or touched MALAUNCH_PROGRESS_FILE for 5 s (x)"
    hung = judge([_rank("rank 0"), _rank("rank 3", "stopped")], 5.0, "h", {"rank 3": "/logs/rank-3.log"}, line)
    assert (hung.failure.name, hung.failure.rank, hung.failure.log_file) == ("rank 3", 3, "/logs/rank-3.log")
    assert hung.failure.exit_code == 124 and hung.failure.tail[-1] == line and hung.score == 4
    assert classify_failure(124, hung.failure.tail).kind == "hang"


def _tool(tmp_path: Path, body: str) -> str:
    path = tmp_path / "py-spy"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_without_py_spy_a_note_says_how_to_get_stacks() -> None:
    stack, note = py_spy_stack(None, os.getpid(), time.monotonic() + 5)
    assert stack is None and "py-spy is not on PATH" in note


def test_py_spy_output_is_the_stack_and_its_failure_a_note(tmp_path: Path) -> None:
    good = _tool(tmp_path, 'echo "Thread $3 (idle): MainThread"; echo "    wait (train.py:12)"')
    stack, note = py_spy_stack(good, 4242, time.monotonic() + 5)
    assert stack == "Thread 4242 (idle): MainThread\n    wait (train.py:12)" and note == ""
    bad = _tool(tmp_path, 'echo "Permission denied (os error 1)" >&2; exit 1')
    stack, note = py_spy_stack(bad, 4242, time.monotonic() + 5)
    assert stack is None and "Permission denied" in note and "SYS_PTRACE" in note


def test_a_py_spy_that_hangs_is_cut_off(tmp_path: Path) -> None:
    slow = _tool(tmp_path, "exec sleep 30")
    stack, note = py_spy_stack(slow, 4242, time.monotonic() + 1.0)
    assert stack is None and "longer than" in note
