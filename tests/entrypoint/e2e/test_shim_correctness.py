"""The shim keeps its promises under real launchers (issue 7): root cause every time, helpers are not ranks,
no escapes, logs never wait for the console, live and quiet output.

Every test runs the real shim (``python -m malaunch.entrypoint``) as a subprocess with real torchrun/msrun.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict

import pytest
from malaunch.entrypoint.run.procs import proctree
from shimutil import MARK, SCRIPTS, assert_nothing_left, free_port, marked_env, marked_pids, shim, write_v10_table

JOB = str(SCRIPTS / "rank_job.py")


def _report(tmp_path: Path) -> Dict[str, object]:
    data: Dict[str, object] = json.loads((tmp_path / "malaunch-logs" / "node-0" / "report.json").read_text())
    return data


@pytest.mark.process
@pytest.mark.torch
@pytest.mark.timeout(1200)
@pytest.mark.parametrize(("mode", "code"), [("exit", 7), ("kill", 137)])
def test_torchrun_root_cause_is_the_failing_rank_20_times_in_a_row(tmp_path: Path, mode: str, code: int) -> None:
    env = marked_env({"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2", "MALAUNCH_GRACE_PERIOD": "5"})
    seen = []
    for attempt in range(20):
        cwd = tmp_path / str(attempt)
        cwd.mkdir()
        done = shim([JOB, "--fail-rank", "1", "--mode", mode, "--code", "7", "--sleep", "60"], env, cwd)
        cause = _report(cwd)["root_cause"]
        assert isinstance(cause, dict)
        seen.append((done.returncode, cause["rank"], cause["exit_code"]))
        assert seen[-1] == (code, 1, code), (attempt, seen, done.stderr[-2000:])
        # torchrun's own teardown chatter never reaches the console (the shim ends torchrun once its workers
        # are gone, usually before it writes its ChildFailedError summary; when it does, into torchrun.log);
        # the shim's summary is the last thing printed, and the failing rank's last line is in its log and on
        # the console with its prefix
        assert "Traceback" not in done.stderr and "ChildFailedError" not in done.stderr, done.stderr[-3000:]
        assert done.stderr.rstrip().splitlines()[-1].startswith("[ma-entrypoint] exit code"), done.stderr[-500:]
        logs = cwd / "malaunch-logs" / "node-0"
        assert "rank 1 failing on purpose" in (logs / "rank-1.log").read_text(), (attempt, done.stdout[-2000:])
        assert "[rank 1] rank 1 failing on purpose" in done.stdout, (attempt, done.stdout[-2000:])
        assert (logs / "torchrun.log").exists()
    assert_nothing_left(env[MARK])


@pytest.mark.process
@pytest.mark.torch
def test_torchrun_ended_as_the_job_ends_loses_no_line_of_any_rank(tmp_path: Path) -> None:
    env = marked_env({"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2", "MALAUNCH_GRACE_PERIOD": "5"})
    lines = 50_000  # ~3.5 MB per rank, written by the workers into their own files, followed by the shim
    done = shim([JOB, "--lines", str(lines), "--fail-rank", "1", "--code", "9", "--delay", "1", "--sleep", "60"],
                env, tmp_path)  # fmt: skip
    assert done.returncode == 9, done.stderr[-3000:]
    logs = tmp_path / "malaunch-logs" / "node-0"
    for rank in (0, 1):
        expected = [f"rank {rank} line {n} {'x' * 60}" for n in range(lines)]
        logged = [line for line in (logs / f"rank-{rank}.log").read_text().splitlines() if " line " in line]
        assert logged == expected, (rank, len(logged))
        prefix = f"[rank {rank}] "
        shown = [line[len(prefix) :] for line in done.stdout.splitlines() if line.startswith(prefix)]
        shown = [line for line in shown if " line " in line]
        assert shown == expected, (rank, len(shown))
    assert "[rank 1] rank 1 failing on purpose" in done.stdout
    cause = _report(tmp_path)["root_cause"]
    assert isinstance(cause, dict)
    assert (cause["rank"], cause["exit_code"], cause["source"]) == (1, 9, "watch"), cause
    assert cause["tail"][-1] == "rank 1 failing on purpose", cause
    assert_nothing_left(env[MARK])


@pytest.mark.process
@pytest.mark.torch
def test_ddp_tutorial_script_error_file_names_the_raising_rank(tmp_path: Path) -> None:
    env = marked_env({"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2", "MALAUNCH_GRACE_PERIOD": "5"})
    done = shim([str(SCRIPTS / "ddp_record.py"), "--fail-rank", "1", "--error", "bad batch 17"], env, tmp_path)
    # rank 1 exits 1 after its traceback, or torch's gloo aborts it in the interpreter's teardown ("terminate called
    # without an active exception": 134), its process group never destroyed: either way the shim exits with the
    # code rank 1 really had, and names its error
    assert done.returncode in (1, 134), done.stderr[-3000:]
    cause = _report(tmp_path)["root_cause"]
    assert isinstance(cause, dict)
    assert (cause["rank"], cause["exit_code"]) == (1, done.returncode), cause
    assert cause["message"] == "ValueError: bad batch 17", cause
    assert "error     : ValueError: bad batch 17" in done.stderr
    assert_nothing_left(env[MARK])


def _method_env(method: str, tmp_path: Path) -> Dict[str, str]:
    if method == "ranktable":
        write_v10_table(tmp_path / "table.json", servers=1, devices=2)
        return marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_MASTER_PORT": str(free_port())})
    if method == "torchrun":
        return marked_env({"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2"})
    return marked_env({"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": "2", "MA_MSRUN_MASTER_PORT": str(free_port()),
                       "MSRUN_CLUSTER_TIME_OUT": "60"})  # fmt: skip


@pytest.mark.process
@pytest.mark.parametrize(
    "method",
    [
        "ranktable",
        pytest.param("torchrun", marks=pytest.mark.torch),
        pytest.param("msrun", marks=pytest.mark.mindspore),
    ],
)
def test_a_helper_that_exits_3_does_not_end_the_job(tmp_path: Path, method: str) -> None:
    env = _method_env(method, tmp_path)
    done = shim([JOB, "--helper-exit", "3", "--sleep", "1"], env, tmp_path, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "helper exited 3" in done.stdout
    assert _report(tmp_path)["root_cause"] is None
    assert_nothing_left(env[MARK])


@pytest.mark.process
@pytest.mark.parametrize("method", ["ranktable", pytest.param("torchrun", marks=pytest.mark.torch)])
def test_a_setsid_daemon_with_an_empty_environment_is_gone_after_the_job(tmp_path: Path, method: str) -> None:
    env = _method_env(method, tmp_path)
    done = shim([JOB, "--daemon", str(tmp_path), "--sleep", "1"], env, tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    daemon = int((tmp_path / "daemon.pid").read_text())
    environ = b""
    with contextlib.suppress(OSError):
        environ = Path(f"/proc/{daemon}/environ").read_bytes()
    assert MARK.encode() not in environ  # it really left the marked environment behind
    assert not proctree.is_alive(daemon), f"daemon {daemon} outlived the job"
    assert_nothing_left(env[MARK])


def _pkill_f_like(pattern: str, mark: str) -> list:
    """What ``pkill -KILL -f pattern`` does, limited to this test's processes (others share the machine)."""
    killed = []
    for pid in marked_pids(mark):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if pattern.encode() in cmdline:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


@pytest.mark.process
def test_watchdog_survives_pkill_f_of_the_shim_and_ends_the_ranks(tmp_path: Path) -> None:
    write_v10_table(tmp_path / "table.json", servers=1, devices=2)
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_MASTER_PORT": str(free_port()),
                      "MALAUNCH_GRACE_PERIOD": "2"})
    shim_bin = str(Path(sys.executable).with_name("ma-entrypoint"))
    proc = subprocess.Popen([sys.executable, shim_bin, JOB, "--sleep", "120", "--say", "up"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        assert all(b"up" in line for line in lines), lines
        before = set(marked_pids(env[MARK]))
        killed = _pkill_f_like("ma-entrypoint", env[MARK])
        assert killed == [proc.pid]  # only the shim's command line matches
        proc.wait(10)
        deadline = time.monotonic() + 20
        while marked_pids(env[MARK]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not marked_pids(env[MARK]), f"left: {marked_pids(env[MARK])} (before: {sorted(before)})"
    finally:
        proc.kill()
        proc.wait()
    assert_nothing_left(env[MARK])


@pytest.mark.process
def test_a_stuck_console_loses_no_log_line_and_keeps_the_grace_period(tmp_path: Path) -> None:
    write_v10_table(tmp_path / "table.json", servers=1, devices=2)
    grace = 3.0
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_MASTER_PORT": str(free_port()),
                      "MALAUNCH_GRACE_PERIOD": str(grace)})
    lines = 100_000  # ~7 MB per rank: far more than any pipe holds
    args = [JOB, "--lines", str(lines), "--fail-rank", "1", "--code", "4", "--delay", "1", "--sleep", "120",
            "--ignore-term"]  # fmt: skip
    stderr = (tmp_path / "stderr.txt").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "malaunch.entrypoint", *args], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=stderr, start_new_session=True)  # fmt: skip
    try:  # nobody reads proc.stdout until the shim has exited
        logs = tmp_path / "malaunch-logs" / "node-0"
        deadline = time.monotonic() + 120
        while "failing on purpose" not in _text(logs / "rank-1.log"):
            assert time.monotonic() < deadline and proc.poll() is None, _text(tmp_path / "stderr.txt")
            time.sleep(0.01)
        failed_at = time.monotonic()
        while proc.poll() is None and time.monotonic() - failed_at < grace + 30:
            time.sleep(0.01)
        took = time.monotonic() - failed_at
    finally:
        proc.kill()
        proc.wait()
        stderr.close()
    assert proc.returncode == 4, _text(tmp_path / "stderr.txt")
    # The grace, then up to 1 s of patience with the stuck console, then the teardown: 4.2 s alone on a slow 2-core
    # machine, 5.6 s once under the whole suite there. A shim that waited for the stuck console (5 s, CONSOLE_STUCK)
    # or for its drain (60 s) is well over.
    assert took < grace + 3.5, f"teardown took {took:.1f}s with a {grace}s grace period"
    for rank in (0, 1):
        text = (logs / f"rank-{rank}.log").read_text().splitlines()
        numbered = [line for line in text if " line " in line]
        assert numbered == [f"rank {rank} line {n} {'x' * 60}" for n in range(lines)]
    assert "did not keep up" in _text(tmp_path / "stderr.txt")
    assert_nothing_left(env[MARK])


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


@pytest.mark.process
@pytest.mark.torch
def test_torchrun_output_is_live(tmp_path: Path) -> None:
    env = marked_env({"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "1", "MALAUNCH_GRACE_PERIOD": "2"})
    env.pop("PYTHONUNBUFFERED", None)
    boot = tmp_path / "boot.sh"  # a shell boot file: no `python -u` from torchrun, only the environment helps
    boot.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{JOB}" --say "before the sleep" --sleep 30\n')
    boot.chmod(0o755)  # torchrun --no_python executes it
    proc = subprocess.Popen([sys.executable, "-m", "malaunch.entrypoint", str(boot)], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        started = time.monotonic()
        line = proc.stdout.readline()
        took = time.monotonic() - started
        assert b"before the sleep" in line and took < 25, (line, took)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 143
    finally:
        proc.kill()
        proc.wait()
    assert_nothing_left(env[MARK])


@pytest.mark.process
@pytest.mark.parametrize("when", ["--daemon", "--daemon-first"])
def test_a_daemon_is_ended_by_the_watchdog_when_the_shim_is_sigkilled(tmp_path: Path, when: str) -> None:
    """``--daemon-first`` forks before the rank imports anything, possibly before the shim moved the ranks into
    the job's cgroup; only ranks born inside keep such a daemon findable (and in the cgroup when it appears)."""
    write_v10_table(tmp_path / "table.json", servers=1, devices=2)
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_MASTER_PORT": str(free_port()),
                      "MALAUNCH_GRACE_PERIOD": "2"})
    proc = subprocess.Popen([sys.executable, "-m", "malaunch.entrypoint", JOB, when, str(tmp_path),
                             "--sleep", "120"], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "daemon.pid").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.005)
        daemon = int((tmp_path / "daemon.pid").read_text())
        cgroup = Path(f"/proc/{daemon}/cgroup").read_text()
        proc.kill()  # at once: the watchdog may not have been told about the daemon yet
        proc.wait()
        deadline = time.monotonic() + 20
        while proctree.is_alive(daemon) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not proctree.is_alive(daemon), f"daemon {daemon} outlived the SIGKILLed shim (cgroup: {cgroup})"
        assert "malaunch-" in cgroup  # the job's own cgroup held it (this host lets the shim make one)
    finally:
        proc.kill()
        proc.wait()
    assert_nothing_left(env[MARK], within=20)
