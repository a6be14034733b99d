"""Group restarts, the pure parts: the policy from the environment, attempt plans, the restart decision."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, List, Mapping

import pytest
from malaunch.entrypoint.contract.cluster_env import parse_cluster_env
from malaunch.entrypoint.contract.config import parse_restart_policy, parse_shim_config
from malaunch.entrypoint.contract.errors import ConfigError
from malaunch.entrypoint.launchers.msrun.recovery_plan import plan_with_recovery, relaunch_spec
from malaunch.entrypoint.launchers.planning import plan_attempt, plan_launch
from malaunch.entrypoint.launchers.running import launcher_for, launcher_of
from malaunch.entrypoint.launchers.torchrun.gate import AttemptGate
from malaunch.entrypoint.launchers.torchrun.stub import STUB, stub_argv
from malaunch.entrypoint.plan.inputs import LaunchInputs
from malaunch.entrypoint.plan.launch_plan import LaunchPlan
from malaunch.entrypoint.report.failure_class import classify_failure
from malaunch.entrypoint.report.report import Failure, RunResult
from malaunch.entrypoint.run import attempt_status
from malaunch.entrypoint.run.attempts import restart_report, run_with_restarts
from malaunch.entrypoint.run.policy import (
    RestartPolicy,
    backoff_for,
    classify_result,
    should_restart,
)
from malaunch.entrypoint.run.procs import proctree
from malaunch.entrypoint.run.procs.watch import WorkerDeath
from malaunch.entrypoint.run.verdict import peer_ended_failure
from procutil import make_plan, new_mark, worker_spec


def inputs(**overrides: Any) -> LaunchInputs:
    base: dict[str, Any] = dict(
        boot_file="/code/train.py", boot_args=("--lr", "0.1"), interpreter="/venv/bin/python", cwd="/work",
        hostname="host-a", path_env="/usr/bin", master_ip="10.0.0.1", python_dir="/venv/bin",
    )  # fmt: skip
    base.update(overrides)
    return LaunchInputs(**base)


def test_policy_defaults_to_no_restarts() -> None:
    assert parse_restart_policy({}) == RestartPolicy(0, "retryable", 1.0)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"MA_MAX_RESTARTS": "3"}, RestartPolicy(3, "retryable", 1.0)),
        ({"MA_MAX_RESTARTS": "2", "MALAUNCH_RESTART_ON": "Always"}, RestartPolicy(2, "always", 1.0)),
        ({"MA_MAX_RESTARTS": "2", "MALAUNCH_RESTART_ON": "1, 137"}, RestartPolicy(2, (1, 137), 1.0)),
        ({"MALAUNCH_RESTART_BACKOFF": "0.5"}, RestartPolicy(0, "retryable", 0.5)),
    ],
)
def test_policy_from_environment(env: Mapping[str, str], expected: RestartPolicy) -> None:
    assert parse_restart_policy(env) == expected


@pytest.mark.parametrize(
    ("name", "value"),
    [("MA_MAX_RESTARTS", "-1"), ("MA_MAX_RESTARTS", "two"), ("MALAUNCH_RESTART_ON", "sometimes"),
     ("MALAUNCH_RESTART_ON", "0"), ("MALAUNCH_RESTART_BACKOFF", "soon"), ("MALAUNCH_RESTART_BACKOFF", "-2")],
)  # fmt: skip
def test_bad_policy_values_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_restart_policy({name: value})
    assert caught.value.variable == name and value in str(caught.value)


def test_backoff_doubles_and_is_capped() -> None:
    policy = RestartPolicy(10, "retryable", 1.0)
    assert [backoff_for(policy, k) for k in (1, 2, 3, 7)] == [1.0, 2.0, 4.0, 30.0]
    assert backoff_for(RestartPolicy(3, "retryable", 120.0), 2) == 120.0  # a long back-off is kept as given


@pytest.mark.parametrize(
    ("on", "code", "tail", "expected"),
    [
        ("retryable", 137, [], True),
        ("retryable", 2, [], False),
        ("retryable", 1, ["Watchdog caught collective operation timeout: WorkNCCL(...)"], True),
        ("always", 2, [], True),
        ("never", 137, [], False),
        ((1, 2), 2, [], True),
        ((1, 2), 137, [], False),
    ],
)
def test_restart_on(on: Any, code: int, tail: List[str], expected: bool) -> None:
    policy = RestartPolicy(3, on, 0.0)
    assert should_restart(policy, classify_failure(code, tail), code) is expected


def test_a_stopped_shim_is_never_restarted_even_with_always() -> None:
    assert not should_restart(RestartPolicy(3, "always"), classify_failure(143, stopped=True), 143)


def test_attempt_plan_moves_logs_and_exports_the_counters(tmp_path: Path) -> None:
    mark = new_mark()
    plan = make_plan(tmp_path, [worker_spec(r, tmp_path, mark=mark) for r in (0, 1)])
    policy = RestartPolicy(2)
    second = plan_attempt(plan, 1, policy)
    assert second.log_dir == str(tmp_path / "attempt-1")
    assert [p.log_file for p in second.processes] == [str(tmp_path / "attempt-1" / f"rank-{r}.log") for r in (0, 1)]
    assert second.rank_logs == {r: str(tmp_path / "attempt-1" / f"rank-{r}.log") for r in (0, 1)}
    for spec in second.processes:
        assert spec.env["TORCHELASTIC_RESTART_COUNT"] == "1"
        assert spec.env["TORCHELASTIC_MAX_RESTARTS"] == "2"
    assert second.report_file == plan.report_file  # one report for every attempt
    assert plan_attempt(plan, 1, policy) == second  # pure
    assert plan_attempt(plan, 1, RestartPolicy(0)) is plan  # no restarts: the plan as it was


def test_msrun_attempt_moves_its_log_dir_flag() -> None:
    env = {"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": "2", "MALAUNCH_LOG_DIR": "/logs"}
    plan = plan_launch(parse_cluster_env(env), inputs())
    attempt = plan_attempt(plan, 2, RestartPolicy(3))
    assert "--log_dir=/logs/attempt-2/msrun" in attempt.processes[0].argv
    assert attempt.rank_logs[0] == "/logs/attempt-2/msrun/worker_0.log"


def test_torchrun_gets_no_restarts_of_its_own_the_shim_makes_every_attempt() -> None:
    # issue 16.2: torchrun restarting by itself raced the shim's restart_on; each attempt is a torchrun now
    env = {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2", "MALAUNCH_LOG_DIR": "/logs"}
    plan = plan_launch(parse_cluster_env(env), inputs())
    assert plan.watch_workers
    attempt = plan_attempt(plan, 1, RestartPolicy(3))
    spec = attempt.processes[0]
    assert spec.argv[:4] == ("/venv/bin/python", "-m", "torch.distributed.run", "--max_restarts=0")
    assert "--log_dir=/logs/attempt-1/torchrun" in spec.argv
    assert spec.env["TORCHELASTIC_ERROR_FILE"] == "/logs/attempt-1/torchrun-error.json"
    assert attempt.watch_workers and attempt.restart_on is None and attempt.log_dir == "/logs/attempt-1"
    assert attempt.rank_logs[1] == "/logs/attempt-1/rank-1.log"
    assert launcher_of(attempt).attempt_limit(attempt, RestartPolicy(3)) == 4


def test_torchrun_workers_start_through_the_attempt_stub_with_the_real_counters() -> None:
    plan = plan_launch(parse_cluster_env({"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2"}), inputs())
    argv = plan_attempt(plan, 2, RestartPolicy(3)).processes[0].argv
    at = argv.index("-c")
    assert argv[at - 4 : at + 4] == ("--no_python", "/venv/bin/python", "-I", "-S", "-c", STUB, "2", "3")
    assert argv[at + 4 :] == ("/venv/bin/python", "-u", *plan.processes[0].argv[plan.processes[0].script_at :])
    assert "--no_python" not in plan.processes[0].argv  # only when the shim drives the attempts


@pytest.mark.parametrize(
    ("flags", "command"),
    [
        ((), ("/py", "-u", "train.py", "a")),
        (("--no_python",), ("train.py", "a")),  # a non-Python boot file: run as it is
        (("--no-python",), ("train.py", "a")),
        (("-m",), ("/py", "-u", "-m", "train.py", "a")),  # torchrun's --module
    ],
)
def test_the_stub_execs_what_torchrun_would_have_run(flags: Any, command: Any) -> None:
    argv = ("/py", "-m", "torch.distributed.run", "--nnodes=1", *flags, "train.py", "a")
    got = stub_argv(argv, 4 + len(flags), 0, 1)
    assert got == ("/py", "-m", "torch.distributed.run", "--nnodes=1", "--no_python",
                   "/py", "-I", "-S", "-c", STUB, "0", "1", *command)  # fmt: skip


def test_the_stub_sets_the_counters_keeps_torchruns_and_execs_in_place(tmp_path: Path) -> None:
    import sys

    probe = "import os,sys;print(os.getpid(),*(os.environ.get(k) for k in sys.argv[1:]))"
    names = ("TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "MALAUNCH_TORCHRUN_RESTART_COUNT")
    env = {**os.environ, "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0"}
    proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", STUB, "4", "5", sys.executable, "-c", probe, *names],
                            env=env, stdout=subprocess.PIPE, text=True)  # fmt: skip
    out, _ = proc.communicate(timeout=60)
    assert out.split() == [str(proc.pid), "4", "5", "0"]  # same pid: exec'd, no extra process


@pytest.mark.parametrize("on", ["always", "never", (1, 137), "retryable"])
def test_torchrun_restart_on_is_the_shims_loop_whatever_it_says(on: Any) -> None:
    plan = plan_launch(parse_cluster_env({"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2"}), inputs())
    attempt = plan_attempt(plan, 0, RestartPolicy(2, on))
    assert attempt.restart_on is None and attempt.watch_workers
    assert "--max_restarts=0" in attempt.processes[0].argv
    assert plan_attempt(plan, 0, RestartPolicy(0, on)) is plan  # no restarts: the plan as it is


def test_a_max_restarts_in_the_extra_params_still_wins() -> None:
    # the user's own --max_restarts: torchrun restarts by itself, the loop starts it once, the gate judges
    env = {"MA_RUN_METHOD": "torchrun", "MA_EXTRA_TORCHRUN_PARAMS": "--max-restarts=1"}
    attempt = plan_attempt(plan_launch(parse_cluster_env(env), inputs()), 0, RestartPolicy(3))
    argv = attempt.processes[0].argv
    assert argv.index("--max_restarts=3") < argv.index("--max-restarts=1")  # argparse: the last one counts
    assert attempt.restart_on == "retryable" and not attempt.watch_workers
    assert launcher_of(attempt).attempt_limit(attempt, RestartPolicy(3)) == 1


def test_recovery_plan_starts_scheduler_and_workers_with_msrun_variables() -> None:
    env = {"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": "2", "MA_NUM_HOSTS": "2", "VC_WORKER_HOSTS": "a,b",
           "MS_ENABLE_RECOVERY": "1", "MS_RECOVERY_PATH": "/ckpt/rec", "MA_MSRUN_MASTER_PORT": "9000"}  # fmt: skip
    master = plan_with_recovery(parse_cluster_env(env), inputs(), parse_shim_config(env).recovery.path)
    assert [p.name for p in master.processes] == ["ms-scheduler", "ms-worker-0", "ms-worker-1"]
    sched, worker = master.processes[0], master.processes[2]
    assert sched.env["MS_ROLE"] == "MS_SCHED" and "MS_NODE_ID" not in sched.env
    assert worker.env["MS_ROLE"] == "MS_WORKER" and worker.env["MS_NODE_ID"] == "1" and worker.rank == 1
    for spec in master.processes:
        assert spec.env["MS_SCHED_HOST"] == "10.0.0.1" and spec.env["MS_SCHED_PORT"] == "9000"
        assert spec.env["MS_WORKER_NUM"] == "4" and spec.env["MS_RECOVERY_PATH"] == "/ckpt/rec"
        assert spec.argv == ("/venv/bin/python", "-u", "/code/train.py", "--lr", "0.1")
    second = plan_with_recovery(parse_cluster_env({**env, "VC_TASK_INDEX": "1"}), inputs(), "/ckpt/rec")
    assert [p.env["MS_NODE_ID"] for p in second.processes] == ["2", "3"]  # no scheduler on host 1
    again = relaunch_spec(worker, 1)
    assert again.env == worker.env and again.log_file.endswith("worker_1.relaunch-1.log")
    assert relaunch_spec(sched, 1).env["MS_NODE_ID"] == "sched"
    assert LaunchPlan.from_json(master.to_json()) == master
    assert plan_attempt(master, 1, RestartPolicy(2)) is master  # recovery relaunches processes, not attempts


def test_without_ms_enable_recovery_msrun_is_planned_as_before() -> None:
    env = {"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": "2"}
    cluster = parse_cluster_env(env)
    assert launcher_for(parse_shim_config(env)).plan(cluster, inputs()) == plan_launch(cluster, inputs())


def _failed(code: int) -> RunResult:
    failure = Failure("rank-0", 0, 0, "h", 1, code, None, "/l/rank-0.log", ("boom",))
    return RunResult(code, failure, None, 0.1)


def test_loop_stops_on_a_user_error_and_keeps_every_attempt(tmp_path: Path) -> None:
    codes = [137, 2, 0]
    seen: List[LaunchPlan] = []

    def run(plan: LaunchPlan, env: Mapping[str, str]) -> RunResult:
        seen.append(plan)
        code = codes[len(seen) - 1]
        return _failed(code) if code else RunResult(0, None, None, 0.1)

    plan = make_plan(tmp_path, [worker_spec(0, tmp_path, mark=new_mark())])
    outcome = run_with_restarts(plan, {}, RestartPolicy(5, "retryable", 0.0), run, lambda text: None)
    assert len(seen) == 2 and outcome.result.exit_code == 2
    assert [a.classification.kind for a in outcome.attempts if a.classification] == ["signal", "user_error"]
    report = restart_report(outcome)
    assert report["failure_class"]["class"] == "user_error" and report["failure_class"]["retryable"] is False
    assert [a["restarted"] for a in report["attempts"]] == [True, False]
    assert report["attempts"][0]["root_cause"]["exit_code"] == 137


def test_attempt_announcements(tmp_path: Path) -> None:
    path = attempt_status.attempt_file(str(tmp_path))
    assert attempt_status.read_attempt(path) is None
    attempt_status.announce_attempt(str(tmp_path), 2, "running")
    assert attempt_status.read_attempt(path) == {"attempt": 2, "state": "running", "pid": os.getpid()}
    attempt_status.announce_attempt(str(tmp_path), 2, "backoff")  # attempt 3 comes after the back-off
    assert attempt_status.read_attempt(path) == {"attempt": 2, "state": "backoff", "pid": os.getpid()}
    for bad in ("{", "[]", '{"attempt": "1", "state": "running", "pid": 1}', '{"attempt": 1, "state": "x", "pid": 1}'):
        Path(path).write_text(bad)
        assert attempt_status.read_attempt(path) is None, bad


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("ma-entrypoint: host 1 (10.0.0.2) failed: this host's attempt ends with it", "rendezvous_timeout"),
        ("ma-entrypoint: host 1 (10.0.0.2) lost: no heartbeat for 20 s", "host_lost"),
    ],
)
def test_an_attempt_another_host_ended_is_retryable(line: str, kind: str) -> None:
    failure = peer_ended_failure("host-a", "/logs/rank-0.log", line)
    result = RunResult(failure.exit_code, failure, None, 1.0)
    found = classify_result(result)
    assert found is not None and (found.kind, found.retryable, result.exit_code) == (kind, True, 3)



def _state(pid: int) -> str:
    info = proctree.read_info(pid)
    return info.state if info is not None else "gone"


def _wait_state(pid: int, wanted: str) -> None:
    deadline = time.monotonic() + 30
    while _state(pid) != wanted:
        assert time.monotonic() < deadline, (pid, _state(pid), wanted)
        time.sleep(0.01)


def test_the_gate_holds_the_launcher_and_resumes_or_ends_it(tmp_path: Path) -> None:
    launcher = subprocess.Popen(["sleep", "60"])  # stands in for torchrun: a real process to stop and resume
    try:
        gate = AttemptGate("retryable", proctree.keys_of({0: launcher.pid}))
        killed = WorkerDeath(0, 1, 111, -signal.SIGKILL, 1.0, 0, None)
        gate.hold(killed)
        _wait_state(launcher.pid, "T")  # stopped while the failure is judged
        assert gate.judge(killed) is None  # SIGKILL: retryable, torchrun restarts as usual
        _wait_state(launcher.pid, "S")
        stopped_peer = WorkerDeath(0, 0, 112, -signal.SIGTERM, 1.1, 1, None)  # torchrun's own teardown
        gate.hold(stopped_peer)
        assert _state(launcher.pid) == "S" and gate.judge(stopped_peer) is None  # never judged
        user = WorkerDeath(0, 0, 113, 2, 2.0, 1, None)
        gate.hold(user)
        _wait_state(launcher.pid, "T")
        kind = gate.judge(user)
        assert kind is not None and kind.kind == "user_error"  # exit 2 of attempt 1 ends the job
        assert launcher.wait(30) == -signal.SIGTERM  # the SIGTERM sent while stopped arrived on SIGCONT
        later = WorkerDeath(0, 1, 114, 1, 2.1, 1, None)
        assert gate.judge(later) is None  # the job is ending: nothing more to judge
    finally:
        launcher.kill()
        launcher.wait()


@pytest.mark.parametrize("restart_on", ["retryable", None])
def test_the_gate_never_signals_a_pid_that_names_another_process_now(restart_on: Any) -> None:
    """The pid torchrun had, reused by a stranger after torchrun was reaped (same pid, later start): the gate's
    SIGSTOP, SIGCONT and SIGTERM all miss it; a launcher already gone when the gate was made is not signalled."""
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        (key,) = proctree.keys_of({0: stranger.pid}).values()
        gate = AttemptGate(restart_on, {0: key._replace(start=key.start - 1), 1: key._replace(pid=2**22 + 1)})
        for index, code in ((0, 1), (1, 1)):
            death = WorkerDeath(index, 0, 111, code, 1.0, 0, None)
            gate.hold(death)
            gate.judge(death)
        gate.release()
        time.sleep(0.2)
        assert _state(stranger.pid) == "S" and stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
    assert proctree.keys_of({0: stranger.pid, 1: os.getpid()}) == {1: proctree.keys_of({1: os.getpid()})[1]}
