"""The rank-table fan-out (the platform default): one process per device of this host's server in the table.

Each process gets the Ascend and torch rank variables (``RANK_TABLE_FILE``, ``RANK_ID``, ``RANK_SIZE``,
``ASCEND_DEVICE_ID``, ``DEVICE_ID``, ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, and
``MASTER_ADDR``/``MASTER_PORT`` when a master is known). A table in a format the ranks cannot read is converted
to v1.0 in the log folder first. The processes are the ranks: their pipes are their output, their exits the facts.
"""


from __future__ import annotations

import os.path
from typing import Dict, List

from ..contract.cluster_env import ClusterEnv
from ..plan.build import boot_command, log_dir_of, make_plan
from ..plan.inputs import LaunchInputs, Needs
from ..plan.launch_plan import LaunchPlan, ProcessSpec
from ..plan.rank_table.v1 import CONVERTED_FORMATS, to_v1_text
from ..run.launcher import Launcher

__all__ = ["FanoutLauncher", "plan_fanout"]

METHOD = "ranktable"


def plan_fanout(cluster: ClusterEnv, inputs: LaunchInputs, log_dir: str) -> LaunchPlan:
    """This host's fan-out plan. Pure."""
    table, index, table_path = inputs.rank_table, inputs.server_index, inputs.rank_table_path
    if table is None or index is None or table_path is None:
        raise ValueError("rank-table planning needs the parsed table and this host's server index")
    server = table.servers[index]
    argv = boot_command(inputs)
    notes = [f"server {index} of {len(table.servers)} in {table.format} rank table: {server.server_id}"]
    files: Dict[str, str] = {}
    if table.format in CONVERTED_FORMATS:
        converted = os.path.join(log_dir, "rank_table", "jobstart_hccl.json")
        files[converted] = to_v1_text(table)
        notes.append(f"the {table.format} table {table_path} is converted to v1.0 at {converted} for the ranks")
        table_path = converted
    # HCCL takes everything from the table; torch-style code that also wants a master gets one when it is known.
    master: Dict[str, str] = {}
    if cluster.master_addr is not None:
        master = {"MASTER_ADDR": cluster.master_addr, "MASTER_PORT": str(cluster.ranktable_master_port)}
    else:
        notes.append("no master address is known (VC_WORKER_HOSTS, MA_VJ_NAME+MA_TASK_NAME unset): the ranks get no "
                     "MASTER_ADDR/MASTER_PORT; HCCL needs none, it reads the rank table")
    notes.extend(table.notes)
    processes: List[ProcessSpec] = []
    rank_logs: Dict[int, str] = {}
    world, local_world = str(table.rank_size), str(server.device_count)
    for local_rank, device in enumerate(server.devices):
        rank = device.rank_id
        log_file = os.path.join(log_dir, f"rank-{rank}.log")
        rank_logs[rank] = log_file
        env = {
            "RANK_TABLE_FILE": table_path,
            "RANK_ID": str(rank),
            "RANK_SIZE": world,
            "ASCEND_DEVICE_ID": str(local_rank),
            "DEVICE_ID": str(local_rank),
            "RANK": str(rank),
            "LOCAL_RANK": str(local_rank),
            "WORLD_SIZE": world,
            "LOCAL_WORLD_SIZE": local_world,
            **master,
        }
        cwd = os.path.join(cluster.device_workdir, f"device{local_rank}") if cluster.device_workdir else None
        processes.append(
            ProcessSpec(
                name=f"rank-{rank}",
                argv=argv,
                env=env,
                cwd=cwd,
                log_file=log_file,
                rank=rank,
                local_rank=local_rank,
            )
        )
    return make_plan(METHOD, cluster, inputs, log_dir, processes, "pipe", rank_logs, notes, files)


class FanoutLauncher(Launcher):
    """The rank-table fan-out's hooks: the defaults (each process is a rank), and the table to read."""

    method = METHOD

    def needs(self, cluster: ClusterEnv) -> Needs:
        return Needs(rank_table=True, server=True)

    def plan(self, cluster: ClusterEnv, inputs: LaunchInputs) -> LaunchPlan:
        return plan_fanout(cluster, inputs, log_dir_of(cluster, inputs))
