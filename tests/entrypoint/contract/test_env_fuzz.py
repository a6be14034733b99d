"""Fuzzing the environment contract: any mapping gives a ClusterEnv or a ConfigError, never anything else."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Dict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from malaunch.entrypoint.contract.cluster_env import parse_cluster_env
from malaunch.entrypoint.contract.errors import ConfigError
from malaunch.entrypoint.main import main

pytestmark = pytest.mark.slow  # searches of many examples

VARIABLES = [
    "MA_RUN_METHOD", "MA_NUM_HOSTS", "MA_NUM_GPUS", "VC_TASK_INDEX", "MA_TASK_INDEX", "VC_WORKER_HOSTS",
    "MA_VJ_NAME", "MA_TASK_NAME", "MA_TORCHRUN_MASTER_PORT", "MA_EXTRA_TORCHRUN_PARAMS", "MA_MSRUN_MASTER_PORT",
    "MA_EXTRA_MSRUN_PARAMS", "MSRUN_CLUSTER_TIME_OUT", "MS_RANKTABLE_ENABLE", "MALAUNCH_GRACE_PERIOD",
    "MALAUNCH_RANK_TABLE_TIMEOUT", "MALAUNCH_MASTER_WAIT", "MALAUNCH_MASTER_PORT",
]  # fmt: skip

interesting = st.one_of(
    st.text(max_size=12),
    st.integers(min_value=-3, max_value=70000).map(str),
    st.sampled_from(
        ["torchrun", "msrun", "ranktable", "", " ", "True", "nan", "inf", "1e3", "a,b", "'", "0x10"]
    ),
)
environments = st.dictionaries(st.sampled_from(VARIABLES), interesting, max_size=8)


@settings(max_examples=400, deadline=None)
@given(environments)
def test_parse_cluster_env_only_ever_raises_config_error(env: Dict[str, str]) -> None:
    try:
        cluster = parse_cluster_env(env)
    except ConfigError as error:
        assert error.variable in VARIABLES or error.variable == "VC_WORKER_HOSTS"
        assert str(error).startswith(f"{error.variable}=")
    else:
        assert 0 <= cluster.node_rank < cluster.num_hosts
        assert 1 <= cluster.torchrun_master_port <= 65535


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(env=environments)
def test_dry_run_with_any_environment_exits_0_or_2_without_traceback(
    tmp_path: Path, env: Dict[str, str]
) -> None:
    boot = tmp_path / "train.py"
    boot.write_text("")
    env = {**env, "MALAUNCH_MASTER_WAIT": "0", "MALAUNCH_RANK_TABLE_TIMEOUT": "0", "PATH": "/usr/bin"}
    env.pop("RANK_TABLE_FILE", None)
    if env.get("MA_RUN_METHOD", "").strip().lower() == "ranktable":
        env["RANK_TABLE_FILE"] = str(tmp_path / "missing.json")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--dry-run", str(boot)], env)
    assert code in (0, 2, 3), err.getvalue()
    assert "Traceback" not in err.getvalue()
    if code:
        assert err.getvalue().startswith("ma-entrypoint: error: ")
