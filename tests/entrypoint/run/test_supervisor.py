"""run_plan with real processes: start, output forwarding (pipe, attempt_files, files), first failure, start errors.

Each test builds a LaunchPlan from tiny scripts in bin/ and ends by proving that nothing it started is left.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from malaunch.entrypoint.contract.errors import LaunchError
from malaunch.entrypoint.plan.launch_plan import ProcessSpec
from malaunch.entrypoint.report.report import format_failure
from malaunch.entrypoint.run.procs.reaper import TOKEN_VAR
from procutil import (
    BIN,
    PY,
    assert_nothing_left,
    make_plan,
    new_mark,
    read_info,
    run,
    unprefix,
    worker_spec,
)

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]


def test_four_ranks_succeed_with_env_and_prefixed_console(tmp_path: Path) -> None:
    mark = new_mark()
    logs = tmp_path / "logs" / "deep"  # created with its parents
    specs = [
        worker_spec(
            r, logs, "--say", f"hello from {r}", "--print-env", TOKEN_VAR, "--print-env", "FROM_BASE",
            "--print-env", "OVERRIDE", mark=mark, env={"OVERRIDE": f"spec-{r}"},
        )
        for r in range(4)
    ]
    result, out, err = run(make_plan(logs, specs), {**os.environ, "FROM_BASE": "base", "OVERRIDE": "base"})
    assert result.exit_code == 0 and result.root_cause is None and result.shim_signal is None
    tokens = set()
    for r in range(4):
        text = (logs / f"rank-{r}.log").read_text().splitlines()
        assert text[0].startswith(f"{TOKEN_VAR}=") and len(text[0]) > len(TOKEN_VAR) + 8
        tokens.add(text[0])
        assert text[1:] == ["FROM_BASE=base", f"OVERRIDE=spec-{r}", f"hello from {r}"]
        assert f"[rank {r}] hello from {r}\n".encode() in out
        assert f"[rank {r}] OVERRIDE=spec-{r}\n".encode() in out
    assert len(tokens) == 1  # one token per run, the same for every process
    assert err == b""
    assert_nothing_left(mark)


def test_failing_rank_is_root_cause_and_siblings_are_terminated(tmp_path: Path) -> None:
    mark = new_mark()
    logs = tmp_path / "logs"
    args = ["--fail-rank", "1", "--exit-code", "6", "--delay", "0.5", "--sleep", "60", "--info-dir", str(tmp_path)]
    specs = [worker_spec(r, logs, *args, "--say", f"line a {r}", "--say-err", f"oops {r}", mark=mark) for r in range(3)]
    result, _, err = run(make_plan(logs, specs))
    infos = [read_info(tmp_path, r) for r in range(3)]
    assert result.exit_code == 6
    cause = result.root_cause
    assert cause is not None
    assert (cause.name, cause.rank, cause.local_rank, cause.host) == ("rank-1", 1, 1, "test-host")
    assert cause.pid == infos[1]["pid"] and cause.exit_code == 6 and cause.signal is None
    assert cause.log_file == str(logs / "rank-1.log")
    assert set(cause.tail) == {"line a 1", "oops 1"}
    text = format_failure(result)
    assert "rank 1 (local rank 1)" in text and str(logs / "rank-1.log") in text
    assert "| line a 1" in text and "| oops 1" in text and "exit code : 6" in text
    assert b"[rank 1] oops 1\n" in err
    assert_nothing_left(mark, [info["pid"] for info in infos])


def test_process_without_rank_uses_its_name_and_cwd_is_created(tmp_path: Path) -> None:
    mark = new_mark()
    logs = tmp_path / "logs"
    workdir = tmp_path / "work" / "device0"
    spec = worker_spec(None, logs, "--say", "single", "--touch", "made-here", mark=mark, name="boot", cwd=str(workdir))
    result, out, _ = run(make_plan(logs, [spec], method="single"))
    assert result.exit_code == 0
    assert out == b"[boot] single\n"
    assert (workdir / "made-here").exists()
    assert_nothing_left(mark)


def test_output_is_byte_exact_in_logs_and_on_console(tmp_path: Path) -> None:
    mark = new_mark()
    logs = tmp_path / "logs"
    big = 1 << 20
    out_spec = worker_spec(0, logs, "--say", "first", "--big-line", str(big), "--bad-utf8", "--no-newline",
                           "no-newline-at-end", mark=mark)
    err_spec = worker_spec(1, logs, "--say-err", "to stderr", "--bad-utf8-err", "--no-newline-err", "partial \xe9",
                           mark=mark)
    result, out, err = run(make_plan(logs, [out_spec, err_spec]))
    assert result.exit_code == 0
    stdout_bytes = (
        b"first\n" + b"B" * big + b"\n" + b"bad \xff\xfe\xc3( utf8 \xed\xa0\x80\n" + b"no-newline-at-end"
    )
    stderr_bytes = b"to stderr\nerr \xff bytes\n" + "partial \xe9".encode()
    assert unprefix(out, b"[rank 0] ") == stdout_bytes
    assert unprefix(err, b"[rank 1] ") == stderr_bytes
    assert (logs / "rank-0.log").read_bytes() == stdout_bytes
    assert (logs / "rank-1.log").read_bytes() == stderr_bytes
    assert_nothing_left(mark)


def test_console_lines_of_parallel_ranks_never_mix(tmp_path: Path) -> None:
    mark = new_mark()
    logs = tmp_path / "logs"
    specs = [worker_spec(r, logs, "--lines", "20000", "--line-bytes", "333", mark=mark) for r in range(3)]
    result, out, _ = run(make_plan(logs, specs))
    assert result.exit_code == 0
    lines = out.split(b"\n")
    assert lines.pop() == b""
    assert len(lines) == 60000
    for line in lines:
        rank = line[6:7]
        assert line == b"[rank " + rank + b"] " + (rank + b" " + b"x" * 333)[:332], line[:80]
    for r in range(3):
        assert (logs / f"rank-{r}.log").stat().st_size == 20000 * 333
    assert_nothing_left(mark)


def test_log_dir_that_cannot_be_created_fails_before_anything_starts(tmp_path: Path) -> None:
    mark = new_mark()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    logs = blocker / "logs"
    marker = tmp_path / "started"
    spec = worker_spec(0, logs, "--touch", str(marker), mark=mark)
    with pytest.raises(LaunchError) as caught:
        run(make_plan(logs, [spec]))
    assert str(logs) in str(caught.value) and "MALAUNCH_LOG_DIR" in str(caught.value)
    assert not marker.exists()
    assert_nothing_left(mark)


def test_program_that_cannot_start_tears_down_the_others(tmp_path: Path) -> None:
    mark = new_mark()
    logs = tmp_path / "logs"
    good = worker_spec(0, logs, "--sleep", "60", "--ignore-term", mark=mark)
    bad = ProcessSpec(name="rank-1", argv=("/nonexistent/trainer",), env={}, cwd=None,
                      log_file=str(logs / "rank-1.log"), rank=1, local_rank=1)
    with pytest.raises(LaunchError) as caught:
        run(make_plan(logs, [good, bad], grace=1.0))
    assert "'/nonexistent/trainer'" in str(caught.value)
    assert_nothing_left(mark)


def test_unwritable_log_file_does_not_kill_the_job(tmp_path: Path) -> None:
    mark = new_mark()
    spec = worker_spec(0, tmp_path, "--say", "still here", "--say", "and here", mark=mark)
    spec = spec._replace(log_file="/dev/full")  # every write fails with ENOSPC
    result, out, err = run(make_plan(tmp_path, [spec]))
    assert result.exit_code == 0
    assert out == b"[rank 0] still here\n[rank 0] and here\n"
    assert err.count(b"cannot write log file /dev/full") == 1
    assert_nothing_left(mark)


def test_signal_handlers_are_restored(tmp_path: Path) -> None:
    mark = new_mark()
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    run(make_plan(tmp_path, [worker_spec(0, tmp_path, mark=mark)]))
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert_nothing_left(mark)


# -- torchrun-style worker files (--redirects=3 --log_dir) -------------------------------------------------
def _torchrun_plan(tmp_path: Path, mark: str, *worker_args: str, extra: tuple = ()) -> tuple:
    logs = tmp_path / "logs"
    spec = ProcessSpec(
        name="torchrun",
        argv=(PY, str(BIN / "fake_torchrun.py"), "--nproc", "2", f"--log_dir={logs / 'torchrun'}", *extra, "--",
              *worker_args),
        env={"MALAUNCH_TEST_MARK": mark},
        cwd=None,
        log_file=str(logs / "torchrun.log"),
    )
    rank_logs = {r: str(logs / f"rank-{r}.log") for r in range(2)}
    return make_plan(logs, [spec], log_source="attempt_files", rank_logs=rank_logs, grace=2.0), logs


def test_torchrun_worker_files_are_followed_into_rank_logs_and_the_console(tmp_path: Path) -> None:
    mark = new_mark()
    plan, logs = _torchrun_plan(
        tmp_path, mark, "--print-env", "TORCHELASTIC_RESTART_COUNT", "--say", "hello", "--say-err", "warn",
        "--bad-utf8", "--bad-utf8-err", extra=("--attempts", "2"),
    )  # fmt: skip
    stale = logs / "torchrun" / "old-run_x" / "attempt_0" / "0"
    stale.mkdir(parents=True)
    (stale / "stdout.log").write_text("stale line from an earlier run\n")
    result, out, err = run(plan)
    assert result.exit_code == 0 and result.root_cause is None
    expected = [b"hello\n", b"warn\n", b"bad \xff\xfe\xc3( utf8 \xed\xa0\x80\n", b"err \xff bytes\n"]
    for r in (0, 1):
        lines = (logs / f"rank-{r}.log").read_bytes().splitlines(keepends=True)
        # every byte as the worker wrote it, attempt 0 complete before attempt 1
        assert sorted(lines[:5]) == sorted([*expected, b"TORCHELASTIC_RESTART_COUNT=0\n"]), lines
        assert sorted(lines[5:]) == sorted([*expected, b"TORCHELASTIC_RESTART_COUNT=1\n"]), lines
        assert out.count(f"[rank {r}] hello\n".encode()) == 2 and err.count(f"[rank {r}] warn\n".encode()) == 2
    assert b"stale line" not in out and b"stale line" not in (logs / "rank-0.log").read_bytes()
    launcher = (logs / "torchrun.log").read_text()
    assert "starting 2 workers" in launcher and "[rank" not in launcher
    assert b"[torchrun] W0101" in err
    assert_nothing_left(mark)


@pytest.mark.parametrize(("worker_args", "code", "sig"), [(("--exit-code", "3"), 3, None),
                                                          (("--kill-self", "6"), 134, 6)])
def test_torchrun_summary_gives_the_root_cause(tmp_path: Path, worker_args: tuple, code: int, sig: object) -> None:
    mark = new_mark()
    plan, logs = _torchrun_plan(
        tmp_path, mark, "--fail-rank", "1", *worker_args, "--delay", "0.3", "--sleep", "60",
        "--say", "before failing", "--info-dir", str(tmp_path),
    )
    result, _, _ = run(plan)
    infos = [read_info(tmp_path, r) for r in (0, 1)]
    cause = result.root_cause
    assert result.exit_code == code and cause is not None
    assert (cause.rank, cause.local_rank, cause.pid, cause.signal) == (1, 1, infos[1]["pid"], sig)
    assert cause.log_file == str(logs / "rank-1.log") and cause.tail == ("before failing",)
    assert_nothing_left(mark, [i["pid"] for i in infos])


def test_torchrun_without_summary_falls_back_to_its_own_code(tmp_path: Path) -> None:
    mark = new_mark()
    plan, logs = _torchrun_plan(tmp_path, mark, "--fail-rank", "0", "--exit-code", "5", extra=("--no-summary",))
    result, _, _ = run(plan)
    cause = result.root_cause
    assert result.exit_code == 1 and cause is not None
    assert (cause.name, cause.rank, cause.log_file) == ("torchrun", None, str(logs / "torchrun.log"))
    assert any("starting 2 workers" in line for line in cause.tail)
    assert_nothing_left(mark)


# -- msrun-style per-rank files ----------------------------------------------------------------------------
def _msrun_plan(tmp_path: Path, mark: str, *args: str, workers: int = 2) -> tuple:
    logs = tmp_path / "logs"
    msrun_logs = logs / "msrun"
    spec = ProcessSpec(
        name="msrun",
        argv=(PY, str(BIN / "fake_msrun.py"), "--log-dir", str(msrun_logs), "--workers", str(workers), *args),
        env={"MALAUNCH_TEST_MARK": mark},
        cwd=None,
        log_file=str(logs / "msrun.log"),
    )
    rank_logs = {r: str(msrun_logs / f"worker_{r}.log") for r in range(workers)}
    return make_plan(logs, [spec], log_source="files", rank_logs=rank_logs, grace=1.0), msrun_logs


def test_files_are_followed_to_the_console(tmp_path: Path) -> None:
    mark = new_mark()
    plan, msrun_logs = _msrun_plan(
        tmp_path, mark, "--late-rank", "1", "--", "--say", "from worker", "--sleep", "1", "--no-newline", "end",
    )
    msrun_logs.mkdir(parents=True)
    (msrun_logs / "worker_1.log").write_text("stale line from an earlier run\n")
    result, out, _ = run(plan)
    assert result.exit_code == 0 and result.root_cause is None
    for r in (0, 1):
        assert f"[rank {r}] from worker\n".encode() in out
        assert f"[rank {r}] end".encode() in out
    assert b"stale line" not in out
    assert b"[msrun] [INFO]" in out and b"Start worker process with rank id:1" in out
    assert "Distributed job finished" in (tmp_path / "logs" / "msrun.log").read_text()
    assert_nothing_left(mark)


def test_msrun_error_line_ends_the_job_promptly(tmp_path: Path) -> None:
    mark = new_mark()
    done = tmp_path / "scheduler-finished"
    plan, msrun_logs = _msrun_plan(
        tmp_path, mark, "--no-kill", "--scheduler-wait", "90", "--scheduler-done", str(done), "--",
        "--fail-rank", "1", "--exit-code", "7", "--delay", "0.8", "--sleep", "90", "--ignore-term",
        "--say", "worker output", "--info-dir", str(tmp_path),
    )
    result, _, _ = run(plan)
    infos = [read_info(tmp_path, r) for r in (0, 1)]
    cause = result.root_cause
    assert result.exit_code == 7 and cause is not None
    assert (cause.rank, cause.local_rank, cause.pid) == (1, 1, infos[1]["pid"])
    assert cause.log_file == str(msrun_logs / "worker_1.log") and cause.tail == ("worker output",)
    # the shim reads the dead worker's status from its zombie, before msrun's own (late) error line
    assert not done.exists()  # the scheduler was killed, not waited for
    # rank 0 ignores SIGTERM in a session of its own: only the token sweep and SIGKILL reach it
    assert infos[0]["sid"] == infos[0]["pid"]
    assert_nothing_left(mark, [i["pid"] for i in infos])


def test_negative_msrun_error_code_means_a_signal(tmp_path: Path) -> None:
    # the worker lives 3 s before it kills itself: its rank comes from the worker watch, which has to have seen it
    # alive (msrun's lines name a dead worker by pid only); 0.8 s was once too short for a watch starved by a loaded
    # machine (the whole suite in 6 workers on 2 cores), which then named no rank
    mark = new_mark()
    plan, _ = _msrun_plan(
        tmp_path, mark, "--scheduler-wait", "90", "--", "--fail-rank", "0", "--kill-self", "9", "--delay", "3",
        "--sleep", "90",
    )
    result, _, _ = run(plan)
    assert result.root_cause is not None
    assert (result.exit_code, result.root_cause.signal, result.root_cause.rank) == (137, 9, 0)
    assert_nothing_left(mark)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
