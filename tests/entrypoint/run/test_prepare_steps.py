"""Issue 39 item 4: prepare steps (``MALAUNCH_PREPARE``), run by every host before attempt 0 and by a replaced host
before it joins an attempt; with several hosts, attempt 0 starts on every host together once all have prepared.

The contract's parsing, the coordinator's messages and rules (pure), then real shims: one host (output prefixed
and logged, a failure, a timeout that kills the step's process group, a stop signal), and hosts started as pods
start them (:mod:`hostsutil`): a host that prepares 60 s longer, a failure on one host, a host replaced after a
loss. The golden cases ``run-ranktable-prepare-*`` hold the exact texts of one host's runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from hostsutil import Hosts, lines
from malaunch.entrypoint.contract.config import parse_shim_config
from malaunch.entrypoint.contract.errors import ConfigError
from malaunch.entrypoint.contract.prepare_steps import PrepareSteps, parse_prepare
from malaunch.entrypoint.plan.launch_plan import LaunchPlan
from malaunch.entrypoint.report.causetext import describe_cause
from malaunch.entrypoint.report.failure_class import classify_failure
from malaunch.entrypoint.run.hosts.jobstate import JobState, Phase
from malaunch.entrypoint.run.hosts.messages import Cause, Finish, Hello, Prepared, Start, parse
from malaunch.entrypoint.run.hosts.wire import WireError
from malaunch.entrypoint.run.prepare_steps import run_prepare
from shimutil import (
    SCRIPTS,
    assert_nothing_left,
    die_with_the_test,
    free_port,
    marked_env,
    marked_pids,
    shim,
    start_shim,
    torchrun_host_env,
)

# -- the contract ----------------------------------------------------------------------------------------------


def test_steps_are_argv_lists_and_the_timeout_has_the_contracts_default_and_bounds() -> None:
    steps = parse_prepare({"MALAUNCH_PREPARE": '[["python", "fetch.py", "--to", "/c d"], ["tar", "xf", "a.tar"]]'})
    assert steps == PrepareSteps((("python", "fetch.py", "--to", "/c d"), ("tar", "xf", "a.tar")), 3600.0)
    assert parse_prepare({"MALAUNCH_PREPARE": "[]"}) is None and parse_prepare({}) is None
    assert parse_prepare({"MALAUNCH_PREPARE": '[["x"]]', "MALAUNCH_PREPARE_TIMEOUT": "2.5"}).timeout == 2.5  # type: ignore[union-attr]
    for bad in ("0", "86401", "1e3"):
        with pytest.raises(ConfigError, match="MALAUNCH_PREPARE_TIMEOUT"):
            parse_prepare({"MALAUNCH_PREPARE_TIMEOUT": bad})


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("curl -o d.tar https://x/d.tar", "not a shell string"),
        ('"curl -o d.tar"', "not a shell string"),
        ('["python fetch.py"]', "command 1 is a shell string"),
        ('[["ok"], []]', "command 2 is not a non-empty list of words"),
        ('[["python", 3]]', "command 1 has a word that is not a string"),
        ('[[""]]', "command 1 names no program"),
        ('{"steps": []}', "expected a list of commands, got dict"),
        ("[[", "expected a JSON list of commands ("),
    ],
)
def test_anything_but_a_list_of_argv_lists_is_one_line_saying_to_give_a_list(value: str, said: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_prepare({"MALAUNCH_PREPARE": value})
    message = str(info.value)
    assert said in message and "give a list of commands, each a list of words" in message and "\n" not in message


def test_the_config_and_the_plan_carry_the_steps() -> None:
    config = parse_shim_config({"MALAUNCH_PREPARE": '[["echo", "hi"]]', "MALAUNCH_PREPARE_TIMEOUT": "60"})
    assert config.prepare == PrepareSteps((("echo", "hi"),), 60.0)
    assert parse_shim_config({}).prepare is None


# -- the coordinator's messages and rules (pure) ---------------------------------------------------------------


def test_hello_says_whether_the_host_prepared_and_prepared_carries_a_failure() -> None:
    assert parse(Hello(1, "a", -1, "/l", prepared=False).to_wire()) == Hello(1, "a", -1, "/l", False)
    assert "prepared" not in Hello(1, "a").to_wire() and parse(Hello(1, "a").to_wire()) == Hello(1, "a")
    cause = Cause(addr="a", name='prepare step 1 ["x"]', code=3, kind="prepare_failed", line="l", tail=("l",))
    assert parse(Prepared(cause).to_wire()) == Prepared(cause) and parse(Prepared(None).to_wire()) == Prepared(None)
    with pytest.raises(WireError, match="'prepared' is not true or false"):
        parse({"t": "hello", "host": 1, "prepared": 1})


def _book(hosts: int = 2, **options: Any) -> JobState:
    return JobState(hosts, options.pop("max_restarts", 1), True, lambda restart: 0.0, 5.0, 10.0, 0.0, **options)


def test_attempt_0_starts_once_every_host_prepared_and_no_join_deadline_gives_up_on_a_preparing_host() -> None:
    book = _book()
    book.join(0, "c0", "a0", -1, 0.0, prepared=False)
    sent = book.join(1, "c1", "a1", -1, 0.1, prepared=False)
    assert not any(isinstance(send.message, Start) for send in sent)
    assert book.prepared(0, None, 0.2) == []
    assert book.advance(500.0) == [] and book.phase is Phase.JOINING  # far past join_wait: still waits
    sent = book.prepared(1, None, 600.0)
    assert [send.message for send in sent] == [Start(0, None)] and book.round.members == (0, 1)


def test_a_failed_prepare_ends_the_job_with_its_cause_on_every_host() -> None:
    book = _book()
    book.join(0, "c0", "a0", -1, 0.0, prepared=False)
    book.join(1, "c1", "a1", -1, 0.0, prepared=False)
    cause = Cause(addr="a1", name='prepare step 2 ["tar", "xf", "d.tar"]', code=2, kind="prepare_failed",
                  line="ma-entrypoint: prepare step 2 of 2 on host 1 (a1) exited with 2", log="/l/prepare.log")
    sent = book.prepared(1, cause, 1.0)
    assert [send.message for send in sent] == [Finish(2, cause._replace(host=1), -1)] and book.phase is Phase.DONE
    assert book.prepared(0, None, 2.0) == []  # the job is over: nothing starts


def test_a_replaced_host_is_waited_for_until_it_prepared_even_past_the_host_wait() -> None:
    book = _book(max_restarts=2)
    book.join(0, "c0", "a0", -1, 0.0)
    assert [send.message for send in book.join(1, "c1", "a1", -1, 0.0)] [-1] == Start(0, None)
    book.leave(1, "c1", "its connection closed", 1.0)
    book.over(0, 0, Cause(ended=True, accept=True, code=1, kind="host_lost"), 1.1)
    assert book.phase is Phase.WAITING
    book.join(1, "c1b", "a1", -1, 2.0, prepared=False)  # the new shim of host 1, preparing
    assert book.advance(100.0) == [] and book.phase is Phase.WAITING  # host_wait (5 s) is long over
    sent = book.prepared(1, None, 101.0)
    assert [send.message.attempt for send in sent if isinstance(send.message, Start)] == [1]


def test_elastic_a_host_that_joins_mid_attempt_is_taken_in_once_it_prepared() -> None:
    book = _book(3, min_hosts=2)
    book.join(0, "c0", "a0", -1, 0.0)
    book.join(1, "c1", "a1", -1, 0.0)
    book.advance(11.0)  # join_wait over: on with hosts 0 and 1
    assert book.round.members == (0, 1)
    assert book.join(2, "c2", "a2", -1, 12.0, prepared=False)[1:] == []  # the welcome only: no end yet
    ends = book.prepared(2, None, 13.0)
    assert [send.to for send in ends] == [0, 1] and all(send.message.why.value == "joined" for send in ends)


def test_the_failure_line_names_the_host_the_step_its_code_class_and_log() -> None:
    cause = Cause(host=1, addr="127.0.0.2", name='prepare step 2 ["tar", "xf", "d.tar"]', code=2,
                  kind="prepare_failed", log="/logs/h1/prepare.log")
    assert describe_cause(cause.to_wire()) == (
        'prepare step 2 ["tar", "xf", "d.tar"] on host 1 (127.0.0.2) exited with 2; class prepare_failed; '
        "log /logs/h1/prepare.log"
    )
    killed = cause._replace(code=137, signal=9)
    assert describe_cause(killed.to_wire()).startswith(
        'prepare step 2 ["tar", "xf", "d.tar"] on host 1 (127.0.0.2) killed by SIGKILL (exit 137); class prepare')


# -- one host, real processes ----------------------------------------------------------------------------------


def _env(tmp_path: Path, steps: List[List[str]], **extra: str) -> Dict[str, str]:
    return marked_env({"MALAUNCH_LOG_DIR": str(tmp_path / "logs"), "MALAUNCH_PREPARE": json.dumps(steps),
                       "MALAUNCH_GRACE_PERIOD": "1", "PREP_DIR": str(tmp_path), **extra})  # fmt: skip


def _boot(tmp_path: Path) -> Path:
    boot = tmp_path / "boot.py"
    boot.write_text("import os, time\nopen(os.path.join(os.environ['PREP_DIR'], 'boot-started'), 'w').write("
                    "repr(time.time()))\nprint('training')\n")  # fmt: skip
    return boot


@pytest.mark.process
def test_one_host_runs_its_steps_in_order_prefixed_and_logged_before_the_script(tmp_path: Path) -> None:
    steps = [["sh", "-c", "echo one; echo two >&2; date +%s.%N > \"$PREP_DIR/step1\""],
             ["sh", "-c", "test -e \"$PREP_DIR/step1\" && echo \"token=${MALAUNCH_SHIM_TOKEN:+yes}\""]]
    done = shim([str(_boot(tmp_path))], _env(tmp_path, steps), tmp_path)
    assert done.returncode == 0, done.stderr
    prepare = [line for line in (done.stdout + done.stderr).splitlines() if "[prepare]" in line]
    assert sorted(prepare) == ["[prepare] one", "[prepare] token=yes", "[prepare] two"]
    assert all(line.startswith("[prepare] ") for line in prepare)  # one prefix a line, its own
    logged = (tmp_path / "logs" / "prepare.log").read_text().splitlines()  # stdout and stderr: their order races
    assert sorted(logged[:2]) == ["one", "two"] and logged[2:] == ["token=yes"]
    assert float((tmp_path / "boot-started").read_text()) >= float((tmp_path / "step1").read_text())
    assert "prepared on host 0" in done.stderr
    state = json.loads((tmp_path / "logs" / "prepare.json").read_text())
    assert (state["state"], state["step"], state["of"]) == ("done", 2, 2)


@pytest.mark.process
def test_a_failing_step_ends_the_job_with_its_code_class_log_and_tail_and_nothing_after_it_runs(
    tmp_path: Path,
) -> None:
    steps = [["sh", "-c", "echo half-way; kill -9 $$"], ["sh", "-c", "touch \"$PREP_DIR/never\""]]
    done = shim([str(_boot(tmp_path))], _env(tmp_path, steps), tmp_path)
    assert done.returncode == 137
    report = json.loads((tmp_path / "logs" / "report.json").read_text())
    cause = report["root_cause"]
    line = ('ma-entrypoint: prepare step 1 of 2 on host 0 ({}) was killed by SIGKILL: '
            '["sh", "-c", "echo half-way; kill -9 $$"]')
    assert cause["tail"] == ["half-way", line.format(cause["host"])]
    assert (cause["signal"], cause["rank"], cause["log_file"]) == (9, None, str(tmp_path / "logs" / "prepare.log"))
    assert report["failure_class"]["class"] == "prepare_failed" and report["attempts"] == []
    assert not (tmp_path / "never").exists() and not (tmp_path / "boot-started").exists()
    assert "failure class: prepare_failed (not retryable)" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.process
def test_a_step_that_cannot_start_is_named_with_exit_127(tmp_path: Path) -> None:
    done = shim([str(_boot(tmp_path))], _env(tmp_path, [["no-such-program-xyz", "--get"]]), tmp_path)
    assert done.returncode == 127
    assert "prepare step 1 of 1 on host 0" in done.stderr and "'no-such-program-xyz'" in done.stderr
    assert "prepare_failed" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.process
def test_a_step_past_the_timeout_has_its_whole_process_group_killed_and_ends_the_job_naming_the_host(
    tmp_path: Path,
) -> None:
    # a step whose shell ignores SIGTERM and leaves a child of its own: both must go
    steps = [["sh", "-c", "trap '' TERM; sleep 300 & echo started; wait"]]
    env = _env(tmp_path, steps, MALAUNCH_PREPARE_TIMEOUT="1")
    done = shim([str(_boot(tmp_path))], env, tmp_path)
    assert done.returncode == 124
    said = [line for line in done.stderr.splitlines() if "timed out" in line and "prepare step 1 of 1" in line]
    assert said and "on host 0 (" in said[0] and "more than 1 s (MALAUNCH_PREPARE_TIMEOUT" in said[0]
    assert json.loads((tmp_path / "logs" / "report.json").read_text())["failure_class"]["class"] == "prepare_failed"
    assert marked_pids(env["MALAUNCH_TEST_MARK"]) == []  # nothing of the step is left, the shim reaped it all


@pytest.mark.process
def test_a_stop_signal_during_a_step_ends_its_group_and_the_shim_with_128_plus_s(tmp_path: Path) -> None:
    steps = [["sh", "-c", "echo ready > \"$PREP_DIR/ready\"; exec sleep 300"]]
    env = _env(tmp_path, steps)
    proc = start_shim([str(_boot(tmp_path))], env, tmp_path)
    deadline = time.monotonic() + 60
    while not (tmp_path / "ready").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert not (tmp_path / "boot-started").exists()
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])


@pytest.mark.process
def test_the_dry_run_shows_the_steps_and_runs_none(tmp_path: Path) -> None:
    done = shim(["--dry-run", str(_boot(tmp_path))], _env(tmp_path, [["touch", str(tmp_path / "x")]]), tmp_path)
    assert done.returncode == 0
    assert json.loads(done.stdout)["prepare"] == {"steps": [["touch", str(tmp_path / "x")]], "timeout": 3600.0}
    assert not (tmp_path / "x").exists()


# -- hosts started as pods start them ----------------------------------------------------------------------------

#: Host 1's step takes 60 s longer; each host notes when its steps ended.
_SKEWED = [["sh", "-c", 'if [ "$VC_TASK_INDEX" = 1 ]; then sleep 60; fi; '
                        'date +%s.%N > "$HOSTS_JOB_DIR/prepared-h$VC_TASK_INDEX"']]


@pytest.mark.process
@pytest.mark.torch
@pytest.mark.slow
def test_a_host_that_prepares_60s_longer_starts_its_ranks_with_the_others_under_a_20s_static_rendezvous(
    hosts: List[Hosts], tmp_path: Path
) -> None:
    extra = {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "1", "MA_TORCHRUN_MASTER_PORT": str(free_port()),
             "MA_EXTRA_TORCHRUN_PARAMS": "--rdzv_conf=timeout=20", "MALAUNCH_PREPARE": json.dumps(_SKEWED),
             "MALAUNCH_HEARTBEAT_TIMEOUT": "10"}  # fmt: skip
    job = Hosts(tmp_path, 2, extra, script="prepare_ranks.py")
    hosts.append(job)
    job.start_all()
    assert [job.wait(0, timeout=240), job.wait(1, timeout=240)] == [0, 0], job.console(0)[-3000:] + job.console(1)
    prepared = {host: float((tmp_path / f"prepared-h{host}").read_text()) for host in (0, 1)}
    assert prepared[1] - prepared[0] >= 55  # the skew really was there
    starts = [float((tmp_path / f"rank-start-{rank}").read_text()) for rank in (0, 1)]
    assert max(starts) - min(starts) < 2.0, starts  # recorded by the ranks themselves
    assert min(starts) >= prepared[1]  # no rank started before the last host prepared
    console = job.console(0)
    assert lines(console, "wait for host(s) 1 (127.0.0.2) to finish their prepare steps (1 of 2 hosts ready)")
    assert "sum 2" in console + job.console(1)


@pytest.mark.process
@pytest.mark.torch
@pytest.mark.slow
def test_without_prepare_steps_the_same_skew_before_the_shim_ends_in_a_rendezvous_timeout(tmp_path: Path) -> None:
    """The control (seed 004's flow): host 1 downloads for 60 s in its pod's command before its shim starts, and
    the hosts do not wait for each other (no coordinator, as the platform's own launch): host 0's torchrun gives
    up after the same 20 s static rendezvous the test above survives."""
    port, mark = free_port(), ""  # the coordinator port (unused: no coordinator) next to it
    procs = []
    for index in (0, 1):
        env = torchrun_host_env(index, gpus=1, port=port, job="skew", log_dir=tmp_path / f"h{index}",
                                coordinator=port + 1)
        env.update({"MALAUNCH_COORDINATOR": "False", "MA_EXTRA_TORCHRUN_PARAMS": "--rdzv_conf=timeout=20",
                    "HOSTS_JOB_DIR": str(tmp_path), "MALAUNCH_GRACE_PERIOD": "3",
                    "MALAUNCH_TEST_MARK": mark or env["MALAUNCH_TEST_MARK"]})  # fmt: skip
        mark = env["MALAUNCH_TEST_MARK"]
        shim_argv = [sys.executable, "-m", "malaunch.entrypoint", str(SCRIPTS / "prepare_ranks.py")]
        argv = ["sh", "-c", 'if [ "$VC_TASK_INDEX" = 1 ]; then sleep 60; fi; exec "$@"', "sh", *shim_argv]
        procs.append(subprocess.Popen(argv, env=env, cwd=str(tmp_path), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True,
                                      preexec_fn=die_with_the_test()))  # fmt: skip
    try:
        code = procs[0].wait(55)  # well before host 1's shim would start
        assert procs[1].poll() is None and not (tmp_path / "rank-start-1").exists()
    finally:
        os.killpg(procs[1].pid, signal.SIGKILL)  # the test's own child's group: its sleep, before any shim
        procs[1].wait(10)
    report = json.loads((tmp_path / "h0" / "report.json").read_text())
    assert code != 0 and report["failure_class"]["class"] == "rendezvous_timeout", report["failure_class"]
    assert_nothing_left(mark)


@pytest.mark.process
def test_a_step_failing_on_one_host_ends_every_host_naming_it_and_stops_the_others_steps(
    hosts: List[Hosts], tmp_path: Path
) -> None:
    steps = [["sh", "-c", 'if [ "$VC_TASK_INDEX" = 1 ]; then echo "no space left" >&2; exit 28; fi; exec sleep 600']]
    job = Hosts(tmp_path, 2, {"MALAUNCH_PREPARE": json.dumps(steps)})
    hosts.append(job)
    job.start_all()
    assert [job.wait(0, timeout=60), job.wait(1, timeout=60)] == [28, 28]  # host 0's 600 s step was ended
    step = json.dumps(steps[0])  # as a line shows it (shorter than the 120 characters it keeps)
    expected = (f"prepare step 1 {step} on host 1 (127.0.0.2) exited with 28; class prepare_failed; "
                f"log {tmp_path}/h1/prepare.log")  # fmt: skip
    assert [describe_cause(job.report(index)["hosts"]["job_cause"]) for index in (0, 1)] == [expected, expected]
    for index in (0, 1):
        report = job.report(index)
        assert report["failure_class"]["class"] == "prepare_failed" and report["attempts"] == []
        assert report["root_cause"]["tail"][-1].startswith("ma-entrypoint: prepare step 1 of 1 on host 1 (")
    assert job.report(0)["root_cause"]["source"] == "peer" and "no space left" in job.report(0)["root_cause"]["tail"]
    assert job.report(0)["root_cause"]["tail"][-1] == job.report(1)["root_cause"]["tail"][-1]  # the whole line
    assert lines(job.console(0), "Root cause: prepare step 1 [") and lines(job.console(0), "on host 127.0.0.2")
    assert not any((tmp_path / f"started-h{host}-a0").exists() for host in (0, 1))


@pytest.mark.process
def test_a_host_replaced_after_a_loss_runs_its_steps_again_before_the_next_attempt_starts(
    hosts: List[Hosts], tmp_path: Path
) -> None:
    # host 1's second run of its steps takes 3 s (past the back-off): the next attempt must wait for it
    steps = [["sh", "-c", 'echo "h$VC_TASK_INDEX" >> "$HOSTS_JOB_DIR/runs"; '
                          'if [ "$(grep -c "h$VC_TASK_INDEX" "$HOSTS_JOB_DIR/runs")" -gt 1 ]; then sleep 3; fi; '
                          'date +%s.%N > "$HOSTS_JOB_DIR/prepared-h$VC_TASK_INDEX"']]  # fmt: skip
    job = Hosts(tmp_path, 2, {"HOSTS_JOB_PLAN": "0:0=sleep,0:1=sleep", "MA_MAX_RESTARTS": "2",
                              "MALAUNCH_RESTART_ON": "always", "MALAUNCH_HOST_WAIT": "60",
                              "MALAUNCH_PREPARE": json.dumps(steps)})  # fmt: skip
    hosts.append(job)
    job.started()
    job.signal_tree(1, signal.SIGKILL)
    job.wait(1)
    job.start(1)  # the platform replaces the pod: a new shim on host 1
    assert [job.wait(0), job.wait(1)] == [0, 0], job.console(0)[-3000:] + job.console(1)
    assert sorted((tmp_path / "runs").read_text().split()) == ["h0", "h1", "h1"]
    again = float((tmp_path / "prepared-h1").read_text())
    for host in (0, 1):
        assert (tmp_path / f"started-h{host}-a1").stat().st_mtime >= again - 0.05  # after host 1 prepared again
    assert len(lines(job.console(0), "prepare step 1 of 1 on host 0")) == 1  # host 0 did not run them again


@pytest.mark.process
def test_a_log_folder_that_cannot_take_the_prepare_log_is_one_line_and_class_prepare_failed(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where the log folder should be
    plan = LaunchPlan("single", 0, 1, "h", (), "pipe", str(blocker / "logs"), {}, 1.0, str(tmp_path / "r.json"),
                      prepare=PrepareSteps((("true",),), 60.0))  # fmt: skip
    said: List[str] = []
    end = run_prepare(plan, {}, said.append, lambda: None)
    assert end.failure is not None and end.failure.exit_code == 3
    assert end.failure.tail[-1].startswith("ma-entrypoint: prepare step 1 of 1 on host 0 (h) cannot start: its log ")
    assert classify_failure(3, end.failure.tail).kind == "prepare_failed" and len(said) == 1
