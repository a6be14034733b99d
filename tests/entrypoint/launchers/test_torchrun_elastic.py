"""Elastic torchrun's command line (launchers/torchrun/elastic.py), pure: each attempt its own rendezvous, and
the lower bound of --nnodes the hosts the coordinator started it with."""

from __future__ import annotations

from malaunch.entrypoint.contract.cluster_env import parse_cluster_env
from malaunch.entrypoint.launchers.torchrun.elastic import elastic_presets, is_elastic, members_argv

ENV = {"MA_RUN_METHOD": "torchrun", "MA_NUM_HOSTS": "4", "VC_WORKER_HOSTS": "m,a,b,c", "MA_NUM_GPUS": "8",
       "MALAUNCH_MIN_HOSTS": "2", "MA_VJ_NAME": "job"}  # fmt: skip


def test_the_master_host_alone_serves_the_rendezvous() -> None:
    master = elastic_presets(parse_cluster_env({**ENV, "VC_TASK_INDEX": "0"}), "torchrun")
    other = elastic_presets(parse_cluster_env({**ENV, "VC_TASK_INDEX": "3"}), "torchrun")
    assert master[:6] == ["--nnodes=2:4", "--nproc_per_node=8", "--rdzv_backend=c10d", "--rdzv_endpoint=m:18888",
                          "--rdzv_id=job", master[5]]  # fmt: skip
    assert master[5].endswith("is_host=1") and other[5].endswith("is_host=0") and "--max_restarts=0" in other


def test_each_attempt_has_its_own_rendezvous_and_its_hosts_as_the_lower_bound() -> None:
    argv = ("py", "-m", "torch.distributed.run", "--nnodes=2:4", "--rdzv_backend=c10d", "--rdzv_id=job", "x.py")
    assert is_elastic(argv)
    assert members_argv(argv, 3, 3) == ("py", "-m", "torch.distributed.run", "--nnodes=3:4", "--rdzv_backend=c10d",
                                        "--rdzv_id=job-a3", "x.py")  # fmt: skip
    assert members_argv(argv, 1, 4)[3] == "--nnodes=4:4"  # every host: the rendezvous completes at once
    with_args = (*argv, "--nnodes=9:9", "--rdzv_id=mine")  # the script's own arguments stay as they are
    assert members_argv(with_args, 2, 3)[-2:] == ("--nnodes=9:9", "--rdzv_id=mine")
    static = ("py", "-m", "torch.distributed.run", "--nnodes=4", "--rdzv_backend=static", "x.py")
    assert not is_elastic(static)


def test_not_elastic_the_cluster_has_no_minimum() -> None:
    assert parse_cluster_env({**ENV, "MALAUNCH_MIN_HOSTS": "", "VC_TASK_INDEX": "1"}).min_hosts is None
