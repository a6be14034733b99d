"""The launcher registry and the hooks each launcher gives the run (issue 18): the right launcher for each
environment and each plan, and the hooks' decisions, without starting anything."""

from __future__ import annotations

from typing import Any, Dict

import pytest
from malaunch.entrypoint.contract.cluster_env import parse_cluster_env
from malaunch.entrypoint.contract.config import parse_shim_config
from malaunch.entrypoint.contract.errors import ConfigError
from malaunch.entrypoint.launchers.msrun.recovery import MsrunRecoveryLauncher
from malaunch.entrypoint.launchers.planning import plan_launch
from malaunch.entrypoint.launchers.running import launcher_for, launcher_of, method_launcher
from malaunch.entrypoint.plan.inputs import LaunchInputs
from malaunch.entrypoint.report.report import Failure
from malaunch.entrypoint.run.launcher import Launcher
from malaunch.entrypoint.run.policy import RestartPolicy


def inputs(**overrides: Any) -> LaunchInputs:
    base: Dict[str, Any] = dict(
        boot_file="/code/train.py", boot_args=(), interpreter="/venv/bin/python", cwd="/work",
        hostname="host-a", path_env="/usr/bin", master_ip="10.0.0.1", python_dir="/venv/bin",
    )  # fmt: skip
    base.update(overrides)
    return LaunchInputs(**base)


def failure(code: int, tail: tuple = ()) -> Failure:
    return Failure("rank-1", 1, 1, "host-a", 42, code, code - 128 if code > 128 else None, "/logs/worker_1.log", tail)


@pytest.mark.parametrize(
    ("env", "launcher"),
    [
        ({}, "SingleLauncher"),
        ({"RANK_TABLE_FILE": "/x.json"}, "FanoutLauncher"),
        ({"MA_RUN_METHOD": "torchrun"}, "TorchrunLauncher"),
        ({"MA_RUN_METHOD": "msrun"}, "MsrunLauncher"),
        ({"MA_RUN_METHOD": "msrun", "MS_ENABLE_RECOVERY": "1"}, "MsrunRecoveryLauncher"),
        ({"MA_RUN_METHOD": "torchrun", "MS_ENABLE_RECOVERY": "1"}, "TorchrunLauncher"),
    ],
)
def test_the_registry_gives_each_environment_its_launcher(env: Dict[str, str], launcher: str) -> None:
    assert type(launcher_for(parse_shim_config(env))).__name__ == launcher


def test_a_bad_ms_enable_recovery_is_refused_under_msrun_only() -> None:
    env = {"MA_RUN_METHOD": "msrun", "MS_ENABLE_RECOVERY": "maybe"}
    with pytest.raises(ConfigError, match="MS_ENABLE_RECOVERY"):
        launcher_for(parse_shim_config(env))
    assert method_launcher(parse_cluster_env(env)).method == "msrun"  # what msrun needs gathered is the same


@pytest.mark.parametrize(
    "env",
    [{}, {"MA_RUN_METHOD": "torchrun"}, {"MA_RUN_METHOD": "msrun"},
     {"MA_RUN_METHOD": "msrun", "MS_ENABLE_RECOVERY": "1"}],
)  # fmt: skip
def test_every_plan_finds_the_launcher_that_made_it(env: Dict[str, str]) -> None:
    cluster = parse_cluster_env(env)
    launcher = launcher_for(parse_shim_config(env))
    plan = launcher.plan(cluster, inputs())
    assert type(launcher_of(plan, parse_shim_config(env))) is type(launcher)
    assert launcher.owns(plan)


def test_a_plan_no_launcher_owns_is_refused() -> None:
    plan = plan_launch(parse_cluster_env({}), inputs())
    with pytest.raises(ValueError, match="no launcher runs method"):
        launcher_of(plan._replace(method="mpirun"))  # _replace skips the plan's own check


def test_the_default_hooks_describe_a_fan_out() -> None:
    base = Launcher()
    assert not (base.starts_workers or base.kills_peers or base.relaunches)
    assert base.read_lines(plan_launch(parse_cluster_env({}), inputs()), b"anything") == ((False, ()))
    assert base.final_facts(plan_launch(parse_cluster_env({}), inputs()), "", {}, 0.0) == []


def test_torchrun_hooks_read_its_agent_and_its_summary() -> None:
    env = {"MA_RUN_METHOD": "torchrun"}
    launcher = launcher_for(parse_shim_config(env))
    plan = launcher.plan(parse_cluster_env(env), inputs())
    assert launcher.read_lines(plan, b"... failed (exitcode: 1) local_rank: 0").quiet
    assert not launcher.read_lines(plan._replace(watch_workers=False), b"failed (exitcode: 1)").quiet
    summary = "Root Cause (first observed failure):\n[0]:\n  rank      : 1 (local_rank: 1)\n  exitcode  : 7 (pid: 9)\n"
    assert not launcher.summary_written(summary)
    assert launcher.summary_written(summary + "=" * 40)
    assert launcher.starts_workers and "TORCHELASTIC_RESTART_COUNT" in launcher.attempt_variables


def test_msrun_hooks_read_its_failure_line() -> None:
    env = {"MA_RUN_METHOD": "msrun"}
    launcher = launcher_for(parse_shim_config(env))
    plan = launcher.plan(parse_cluster_env(env), inputs())
    says = launcher.read_lines(plan, b"Worker process 123 exit with exception. Error code: -9.\n")
    assert says.failures == ((123, -9),) and not says.quiet
    assert launcher.kills_peers and launcher.starts_workers


def test_recovery_relaunches_within_the_budget_and_restart_on() -> None:
    launcher = MsrunRecoveryLauncher(RestartPolicy(2, "retryable"), 5.0)
    env = {"MA_RUN_METHOD": "msrun", "MS_ENABLE_RECOVERY": "1"}
    plan = launcher_for(parse_shim_config(env)).plan(parse_cluster_env(env), inputs())
    worker = plan.processes[-1]
    again = launcher.relaunch(worker, failure(137), 0, stopping=False)
    assert again is not None and again.spec is not None and again.delay == 5.0
    assert again.spec.log_file.endswith(".relaunch-1.log") and again.spec.env == worker.env
    node = worker.env["MS_NODE_ID"]
    assert again.says[-1] == f"{worker.name} failed (signal): relaunch 1 of 2 with MS_NODE_ID={node} in 5s"
    over = launcher.relaunch(worker, failure(137), 2, stopping=False)  # the budget is spent
    assert over is not None and over.spec is None and len(over.says) == 1
    user = launcher.relaunch(worker, failure(4), 0, stopping=False)  # a user error is not retryable
    assert user is not None and user.spec is None
    assert launcher.relaunch(worker, failure(137), 0, stopping=True).spec is None  # type: ignore[union-attr]
    assert launcher.attempt_limit(plan, RestartPolicy(3)) == 1
    assert launcher.plan_attempt(plan, 1, RestartPolicy(3)) is plan
