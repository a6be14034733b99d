"""msrun, one worker fails and msrun SIGKILLs the other (issue 16: the wrong root cause of the msrun goldens).

The failing worker lives too briefly for the shim's watch to see it alive: the shim is stopped (SIGSTOP) from
msrun's start until that worker is dead, so the watch first sees it as msrun's zombie (no environment left to read)
and learns its rank from the record it wrote as it was born (run/procs/births.py): the shim ends the job on that
fact. Without the record (deleted by the test) only msrun knows it, by pid ("Worker process <pid> exit with
exception. Error code: N", logged before msrun SIGKILLs the other worker); msrun itself is then held (SIGSTOP) until
the shim's watch has a pidfd for the surviving worker, so every run goes through the same steps: one run per case.
On main the shim dropped msrun's line (no rank for its pid) and named the worker msrun killed: rank 0, 137.

A worker with a SyntaxError (it lives about 25 ms) is named by its rank, its own log, its code and its last lines in
every run: before birth records, about one run in three named "process msrun" and msrun's own log.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Callable, Dict, List

import pytest
from malaunch.entrypoint.run.procs import proctree
from shimutil import MARK, SCRIPTS, assert_nothing_left, free_port, marked_env, pidfds_of, start_shim

pytestmark = [pytest.mark.process, pytest.mark.mindspore]


def _wait(what: str, done: Callable[[], bool], alive: Callable[[], bool], within: float = 120.0) -> None:
    deadline = time.monotonic() + within
    while not done():
        assert alive() and time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.005)


def _msrun_of(shim: int) -> List[int]:
    """The shim's msrun (its child running ``mindspore.parallel.cluster.run``; the watchdog is a child too)."""
    found = []
    for info in proctree.snapshot().values():
        if info.ppid == shim:
            try:
                argv = Path(f"/proc/{info.pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"mindspore.parallel.cluster.run" in argv:
                found.append(info.pid)
    return found


def _gone_or_zombie(pid: int) -> bool:
    info = proctree.read_info(pid)
    return info is None or info.zombie


def _watched(holder: int, pid: int) -> bool:
    """The shim's watch keeps a pidfd for ``pid``: the same fd open 0.3 s apart (a scan's pidfd for a process that
    turns out not to be a worker is closed at once; a worker's is kept)."""
    first = pidfds_of(holder, pid)
    if not first:
        return False
    time.sleep(0.3)
    return bool(first & pidfds_of(holder, pid))


def _run(tmp_path: Path, mode: str, record: bool) -> tuple[int, Dict[str, object], str]:
    folder = tmp_path / "sync"
    folder.mkdir()
    env = marked_env({"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": "2", "MA_MSRUN_MASTER_PORT": str(free_port()),
                      "MALAUNCH_REPORT_FILE": str(tmp_path / "report.json"),
                      "MALAUNCH_LOG_DIR": str(tmp_path / "logs"), "MALAUNCH_GRACE_PERIOD": "5"})  # fmt: skip
    proc = start_shim([str(SCRIPTS / "msrun_quick_failure.py"), str(folder), mode], env, tmp_path)
    stopped: List[int] = []
    try:
        alive = lambda: proc.poll() is None  # noqa: E731
        _wait("msrun to start", lambda: bool(_msrun_of(proc.pid)), alive)
        os.kill(proc.pid, signal.SIGSTOP)  # before msrun starts its workers (it imports MindSpore first)
        stopped.append(proc.pid)
        (msrun,) = _msrun_of(proc.pid)
        ready = [folder / "ready-0", folder / "ready-1"]
        _wait("both workers", lambda: all(path.exists() for path in ready), alive)
        rank0, rank1 = (int(path.read_text()) for path in ready)
        os.kill(msrun, signal.SIGSTOP)  # msrun polls its workers every second: not before the shim sees rank 0
        stopped.append(msrun)
        (folder / "go").write_text("")
        _wait("rank 1 to fail", lambda: _gone_or_zombie(rank1), alive)  # msrun's zombie: no environment left
        if not record:  # as if rank 1 had left no birth record: the watch cannot know it, msrun's line names it
            for path in (tmp_path / "logs" / ".births").glob(f"{rank1}-*"):
                path.unlink()
        os.kill(proc.pid, signal.SIGCONT)
        stopped.remove(proc.pid)
        if not record:
            _wait("the watch to see rank 0", lambda: _watched(proc.pid, rank0), alive)
            os.kill(msrun, signal.SIGCONT)  # msrun logs rank 1's failure and SIGKILLs rank 0
            stopped.clear()
        # with its record, the watch finds rank 1's zombie and the shim ends the job, msrun still held
        _out, err = proc.communicate(timeout=180)
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert_nothing_left(env[MARK])
    if not record:
        msrun_log = "".join(path.read_text() for path in (tmp_path / "logs").rglob("msrun.log"))
        assert f"Worker process {rank1} exit with exception" in msrun_log, msrun_log[-2000:]
    return proc.returncode, json.loads((tmp_path / "report.json").read_text()), err


@pytest.mark.parametrize(("mode", "code"), [("exit", 3), ("kill", 137)])
def test_the_worker_msrun_names_is_the_root_cause_not_the_one_msrun_killed(
    tmp_path: Path, mode: str, code: int
) -> None:
    """Rank 1's record gone: msrun's line names its pid, and the one rank the watch never saw is that pid's."""
    exit_code, report, err = _run(tmp_path, mode, record=False)
    cause = report["root_cause"]
    assert isinstance(cause, dict), report
    assert (exit_code, cause["rank"], cause["exit_code"], cause["source"]) == (code, 1, code, "summary"), err
    assert cause["why"] == "the only failure", cause  # rank 0 died of msrun's SIGKILL: a consequence
    assert "Root cause: rank 1 " in err, err


@pytest.mark.parametrize(("mode", "code"), [("exit", 3), ("kill", 137)])
def test_a_worker_dead_before_the_watch_looked_is_known_by_its_birth_record(
    tmp_path: Path, mode: str, code: int
) -> None:
    """Rank 1 first seen as msrun's zombie: its record names its rank, its death is the watch's fact, and the shim
    ends the job without waiting for msrun's word (msrun is held all along)."""
    exit_code, report, err = _run(tmp_path, mode, record=True)
    cause = report["root_cause"]
    assert isinstance(cause, dict), report
    assert (exit_code, cause["rank"], cause["exit_code"], cause["source"]) == (code, 1, code, "watch"), err
    assert cause["why"] == "the only failure", cause  # rank 0 died of the shim's SIGTERM: a consequence
    assert "Root cause: rank 1 " in err, err


@pytest.mark.slow
def test_a_worker_with_a_syntax_error_is_named_by_its_rank_in_every_run(tmp_path: Path) -> None:
    """Both workers and msrun's scheduler die of the SyntaxError within ms of their start; msrun reaps them at its
    1 s poll, so the watch mostly first sees zombies. Five runs: each names a rank, that rank's ``worker_N.log``, exit
    code 1 and the SyntaxError's last lines, and nothing calls a worker's pid "process msrun"."""
    script = tmp_path / "bad.py"
    script.write_text("import os\nx = (\n")
    for run in range(5):
        logs = tmp_path / f"logs-{run}"
        env = marked_env({"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": "2", "MA_MSRUN_MASTER_PORT": str(free_port()),
                          "MALAUNCH_REPORT_FILE": str(logs / "report.json"),
                          "MALAUNCH_LOG_DIR": str(logs)})  # fmt: skip
        proc = start_shim([str(script)], env, tmp_path)
        try:
            _out, err = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert_nothing_left(env[MARK])
        cause = json.loads((logs / "report.json").read_text())["root_cause"]
        rank = cause["rank"]
        assert rank in (0, 1), (run, err)
        log = str(logs / "msrun" / f"worker_{rank}.log")
        assert (proc.returncode, cause["exit_code"], cause["log_file"]) == (1, 1, log), (run, err)
        assert cause["tail"][-2:] == ["        ^", "SyntaxError: '(' was never closed"], (run, cause)
        assert f"Root cause: rank {rank} (local rank {rank}) on host " in err, (run, err)
        assert "process msrun" not in err and "Root cause: msrun" not in err, (run, err)
