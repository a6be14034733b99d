"""Environment -> ClusterEnv: defaults, aliases, master address rules and one clear error per bad value."""

from __future__ import annotations

import pytest
from malaunch.entrypoint.contract.cluster_env import parse_cluster_env, require_master
from malaunch.entrypoint.contract.errors import ConfigError


def test_defaults_for_an_empty_environment() -> None:
    cluster = parse_cluster_env({})
    assert cluster.method == ""
    assert (cluster.num_hosts, cluster.devices_per_host, cluster.node_rank) == (1, 0, 0)
    assert cluster.procs_per_host == 1
    assert cluster.master_addr == "127.0.0.1"
    assert cluster.torchrun_master_port == 18888
    assert cluster.msrun_cluster_time_out == 600
    assert cluster.msrun_rank_table is False


def test_platform_variables_are_read() -> None:
    cluster = parse_cluster_env(
        {
            "MA_RUN_METHOD": "TorchRun",
            "MA_NUM_HOSTS": "2",
            "MA_NUM_GPUS": "8",
            "VC_TASK_INDEX": "1",
            "VC_WORKER_HOSTS": "job-worker-0.job, job-worker-1.job",
            "MA_VJ_NAME": "job",
            "MA_TORCHRUN_MASTER_PORT": "29999",
            "MA_EXTRA_TORCHRUN_PARAMS": "--rdzv_conf=timeout=7200 --max-restarts 3",
            "MS_RANKTABLE_ENABLE": "True",
        }
    )
    assert cluster.method == "torchrun"
    assert cluster.worker_hosts == ("job-worker-0.job", "job-worker-1.job")
    assert cluster.master_addr == "job-worker-0.job"
    assert cluster.torchrun_extra == ("--rdzv_conf=timeout=7200", "--max-restarts", "3")
    assert cluster.job_id == "job"
    assert cluster.msrun_rank_table is True


def test_master_from_volcano_job_and_task_names() -> None:
    cluster = parse_cluster_env({"MA_NUM_HOSTS": "3", "MA_VJ_NAME": "ma-job-x", "MA_TASK_NAME": "worker"})
    assert cluster.master_addr == "ma-job-x-worker-0.ma-job-x"


def test_task_index_alias() -> None:
    assert (
        parse_cluster_env({"MA_NUM_HOSTS": "2", "MA_TASK_INDEX": "1", "VC_WORKER_HOSTS": "a,b"}).node_rank
        == 1
    )
    with pytest.raises(ConfigError, match="MA_TASK_INDEX"):
        parse_cluster_env(
            {"MA_NUM_HOSTS": "3", "VC_TASK_INDEX": "1", "MA_TASK_INDEX": "2", "VC_WORKER_HOSTS": "a,b,c"}
        )


@pytest.mark.parametrize(
    ("env", "variable", "fragment"),
    [
        ({"MA_RUN_METHOD": "mpirun"}, "MA_RUN_METHOD", "ranktable, torchrun, msrun"),
        ({"MA_NUM_HOSTS": "0"}, "MA_NUM_HOSTS", "between 1 and 16384"),
        ({"MA_NUM_HOSTS": "two"}, "MA_NUM_HOSTS", "whole number"),
        ({"MA_NUM_GPUS": "-1"}, "MA_NUM_GPUS", "between 0 and 1024"),
        ({"MA_NUM_GPUS": "20000"}, "MA_NUM_GPUS", "between 0 and 1024"),
        ({"MA_NUM_HOSTS": "16385"}, "MA_NUM_HOSTS", "between 1 and 16384"),
        ({"MA_NUM_HOSTS": "1_0"}, "MA_NUM_HOSTS", "ASCII digits"),
        ({"MA_NUM_HOSTS": "\u0663"}, "MA_NUM_HOSTS", "ASCII digits"),  # Arabic-Indic three
        ({"MA_NUM_HOSTS": "\uff12"}, "MA_NUM_HOSTS", "ASCII digits"),  # full-width two
        ({"MA_NUM_HOSTS": "+2"}, "MA_NUM_HOSTS", "ASCII digits"),
        ({"MA_NUM_GPUS": "1234567890"}, "MA_NUM_GPUS", "ASCII digits"),
        ({"VC_TASK_INDEX": "0x1"}, "VC_TASK_INDEX", "ASCII digits"),
        ({"MALAUNCH_GRACE_PERIOD": "1_0"}, "MALAUNCH_GRACE_PERIOD", "ASCII digits"),
        ({"MALAUNCH_GRACE_PERIOD": "1e3"}, "MALAUNCH_GRACE_PERIOD", "ASCII digits"),
        ({"MALAUNCH_RANK_TABLE_TIMEOUT": "\u0663"}, "MALAUNCH_RANK_TABLE_TIMEOUT", "ASCII digits"),
        ({"MALAUNCH_GRACE_PERIOD": "inf"}, "MALAUNCH_GRACE_PERIOD", "finite"),
        (
            {"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "2", "VC_WORKER_HOSTS": "a,b"},
            "VC_TASK_INDEX",
            "below MA_NUM_HOSTS",
        ),
        ({"MA_NUM_HOSTS": "2", "VC_WORKER_HOSTS": "a"}, "VC_WORKER_HOSTS", "expected 2 host names"),
        ({"VC_WORKER_HOSTS": "a,,"}, "VC_WORKER_HOSTS", "no empty entries"),
        ({"MA_TORCHRUN_MASTER_PORT": "70000"}, "MA_TORCHRUN_MASTER_PORT", "between 1 and 65535"),
        ({"MA_EXTRA_TORCHRUN_PARAMS": "--x 'unclosed"}, "MA_EXTRA_TORCHRUN_PARAMS", "quotes"),
        ({"MS_RANKTABLE_ENABLE": "maybe"}, "MS_RANKTABLE_ENABLE", "True or False"),
        ({"MALAUNCH_GRACE_PERIOD": "soon"}, "MALAUNCH_GRACE_PERIOD", "seconds"),
        ({"MALAUNCH_GRACE_PERIOD": "nan"}, "MALAUNCH_GRACE_PERIOD", "finite"),
    ],
)
def test_bad_values_name_variable_value_and_expectation(
    env: dict[str, str], variable: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_cluster_env(env)
    assert info.value.variable == variable
    message = str(info.value)
    assert message.startswith(f"{variable}=")
    assert fragment in message


def test_parsing_never_mutates_the_mapping() -> None:
    env = {"MA_NUM_HOSTS": "2", "VC_WORKER_HOSTS": "a,b", "VC_TASK_INDEX": "1"}
    before = dict(env)
    parse_cluster_env(env)
    assert env == before


def test_numbers_in_ascii_digits_are_accepted() -> None:
    cluster = parse_cluster_env({"MA_NUM_HOSTS": "16384", "MA_NUM_GPUS": "1024", "VC_TASK_INDEX": "16383",
                                 "MA_VJ_NAME": "j", "MA_TASK_NAME": "w", "MALAUNCH_GRACE_PERIOD": "2.5",
                                 "MSRUN_CLUSTER_TIME_OUT": "-1", "MALAUNCH_RANK_TABLE_TIMEOUT": "0"})
    assert (cluster.num_hosts, cluster.devices_per_host, cluster.node_rank) == (16384, 1024, 16383)
    assert (cluster.grace_period, cluster.msrun_cluster_time_out, cluster.rank_table_timeout) == (2.5, -1, 0.0)


def test_several_hosts_without_a_master_name_is_fine_until_a_method_needs_one() -> None:
    cluster = parse_cluster_env({"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "1"})
    assert cluster.master_addr is None
    with pytest.raises(ConfigError) as info:
        require_master(cluster, "torchrun")
    assert info.value.variable == "VC_WORKER_HOSTS"
    assert "torchrun" in str(info.value) and "MA_VJ_NAME" in str(info.value)
    assert require_master(parse_cluster_env({"MA_NUM_HOSTS": "2", "VC_WORKER_HOSTS": "a,b"}), "msrun") == "a"


def test_long_values_are_shown_shortened() -> None:
    value = "x" * 100_000
    with pytest.raises(ConfigError) as info:
        parse_cluster_env({"MA_NUM_HOSTS": value})
    message = str(info.value)
    assert len(message) < 300 and "100000 characters" in message
    assert info.value.value == value  # the field keeps the whole value for code that needs it
