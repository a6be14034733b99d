"""msrun: MindSpore's ``python -m mindspore.parallel.cluster.run`` per host, which starts this host's workers.

Plan: ``--worker_num=N*G --local_worker_num=G --master_addr=IP --master_port=P --node_rank=I --log_dir=D
--join=True --cluster_time_out=T [--rank_table_file=F]``; ``MA_EXTRA_MSRUN_PARAMS`` follow the presets and
replace a preset flag of the same name. msrun starts ``python`` from PATH, so the plan puts a directory whose
``python`` is the shim's interpreter first. msrun writes ``worker_N.log`` itself (``log_source="files"``), and
``--tail_worker_log=-2`` keeps it from copying them to its console: the shim follows them, each line with its
rank prefix.

Run: the workers are watched (msrun's scheduler is not a worker); msrun's line "Worker process <pid> exit with
exception. Error code: <rc>" is a fact; msrun SIGKILLs the peers of a failed worker itself (their SIGKILL is
collateral).
"""


from __future__ import annotations

import os.path
import re
from typing import List, Tuple

from ...contract.cluster_env import ClusterEnv
from ...plan.build import log_dir_of, make_plan, merge_flags, node_ranks
from ...plan.inputs import LaunchInputs, Needs
from ...plan.launch_plan import LaunchPlan, ProcessSpec
from ...run.launcher import Launcher, LauncherSays

__all__ = ["MSRUN_MODULE", "MSRUN_TAIL_NONE", "MsrunLauncher", "parse_msrun_failures", "plan_msrun"]

METHOD = "msrun"
MSRUN_MODULE = "mindspore.parallel.cluster.run"
#: ``--tail_worker_log`` names ranks whose logs msrun copies to its console; no rank is ever -2, so msrun
#: tails nothing and the supervisor follows ``worker_N.log`` itself, each line with its rank prefix.
MSRUN_TAIL_NONE = "-2"
_MSRUN_FAILED = rb"Worker process (\d+) exit with exception\. Error code: (-?\d+)"


def parse_msrun_failures(lines: bytes) -> List[Tuple[int, int]]:
    """``(pid, code)`` for each "Worker process <pid> exit with exception. Error code: <rc>." line."""
    if b"exit with exception" not in lines:
        return []
    return [(int(m.group(1)), int(m.group(2))) for m in re.finditer(_MSRUN_FAILED, lines)]


def python_path(inputs: LaunchInputs) -> str:
    """PATH with the directory whose ``python`` is the interpreter first (msrun starts ``python``)."""
    assert inputs.python_dir is not None
    return f"{inputs.python_dir}{os.pathsep}{inputs.path_env}" if inputs.path_env else inputs.python_dir


def plan_msrun(cluster: ClusterEnv, inputs: LaunchInputs, log_dir: str) -> LaunchPlan:
    """This host's msrun plan. Pure."""
    if inputs.master_ip is None or inputs.python_dir is None:
        raise ValueError("msrun planning needs master_ip and python_dir resolved by main")
    per_host = cluster.procs_per_host
    msrun_logs = os.path.join(log_dir, "msrun")
    presets = [
        f"--worker_num={cluster.num_hosts * per_host}",
        f"--local_worker_num={per_host}",
        f"--master_addr={inputs.master_ip}",
        f"--master_port={cluster.msrun_master_port}",
        f"--node_rank={cluster.node_rank}",
        f"--log_dir={msrun_logs}",
        "--join=True",
        f"--cluster_time_out={cluster.msrun_cluster_time_out}",
    ]
    if cluster.msrun_rank_table:
        if inputs.rank_table_path is None:
            raise ValueError("msrun rank-table mode needs rank_table_path resolved by main")
        presets.append(f"--rank_table_file={inputs.rank_table_path}")
    presets.append(f"--tail_worker_log={MSRUN_TAIL_NONE}")
    argv = [inputs.interpreter, "-m", MSRUN_MODULE, *merge_flags(presets, cluster.msrun_extra)]
    argv += [inputs.boot_file, *inputs.boot_args]
    proc = ProcessSpec(
        name=METHOD,
        argv=tuple(argv),
        env={"PATH": python_path(inputs), "PYTHONUNBUFFERED": "1"},
        cwd=None,
        log_file=os.path.join(log_dir, "msrun.log"),
    )
    rank_logs = {rank: os.path.join(msrun_logs, f"worker_{rank}.log") for rank in node_ranks(cluster)}
    return make_plan(METHOD, cluster, inputs, log_dir, [proc], "files", rank_logs, watch_workers=True)


class MsrunLauncher(Launcher):
    """The msrun method's hooks."""

    method = METHOD
    starts_workers = True
    workers_lead_groups = True  # msrun 2.10 starts each worker with preexec_fn=os.setsid
    kills_peers = True

    def needs(self, cluster: ClusterEnv) -> Needs:
        return Needs(rank_table=cluster.msrun_rank_table, master=True, master_ip=True, python_dir=True)

    def plan(self, cluster: ClusterEnv, inputs: LaunchInputs) -> LaunchPlan:
        return plan_msrun(cluster, inputs, log_dir_of(cluster, inputs))

    def owns(self, plan: LaunchPlan) -> bool:
        return plan.method == METHOD and plan.log_source != "pipe"  # one process per rank: the recovery plan

    def read_lines(self, plan: LaunchPlan, lines: bytes) -> LauncherSays:
        return LauncherSays(failures=tuple(parse_msrun_failures(lines)))
