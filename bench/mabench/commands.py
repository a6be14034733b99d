"""The command line and environment of each launcher the benchmark compares, all on the same worker script.

Kinds:

- ``shim-ranktable``: ``python -m malaunch.entrypoint SCRIPT`` with ``MA_RUN_METHOD=ranktable`` and a generated
  v1.0 rank table of 1 server x N devices;
- ``shim-torchrun`` / ``shim-msrun``: the shim with ``MA_RUN_METHOD=torchrun|msrun`` and ``MA_NUM_GPUS=N``;
- ``torchrun``: ``python -m torch.distributed.run --standalone --nnodes=1 --nproc_per_node=N`` (bare);
- ``msrun``: ``python -m mindspore.parallel.cluster.run --worker_num=N --local_worker_num=N --join=True``
  (bare, ``--cluster_time_out`` left at its default);
- ``shim-plan-bound``: not a launcher but a bound (``bench/workers/plan_then_fork.py``, the same environment as
  ``shim-ranktable``): the shim's guards and planning, then the ranks, then the run phase's imports;
- ``shim-ranktable@this`` / ``shim-ranktable@baseline``: ``shim-ranktable`` mounted from a link farm of this tree
  or of an earlier commit (:mod:`.baseline`, ``bench/run.py --baseline REF``).

Every launcher gets a free port (bound to port 0 a moment before), and its logs go under the scratch folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Mapping, Sequence, Tuple

from .baseline import FARMS
from .procs import PYTHON, WORKERS, bench_env, free_port

__all__ = ["SUBJECTS", "command", "v10_rank_table"]

#: The shim wrapping a launcher: MA_RUN_METHOD and the variable that carries that launcher's master port.
_SHIM_LAUNCHERS = {
    "shim-torchrun": ("torchrun", "MA_TORCHRUN_MASTER_PORT"),
    "shim-msrun": ("msrun", "MA_MSRUN_MASTER_PORT"),
}

SUBJECTS: Mapping[str, str] = {
    "popen": "floor: one python Popen x N",
    "shim-ranktable": "shim (ranktable)",
    "shim-torchrun": "shim (torchrun)",
    "shim-msrun": "shim (msrun)",
    "torchrun": "torchrun --standalone",
    "msrun": "msrun",
    "shim-plan-bound": "bound: the shim's planning, then the ranks",
    "shim-ranktable@this": "shim (ranktable), this tree",
    "shim-ranktable@baseline": "shim (ranktable), baseline commit",
}


def v10_rank_table(servers: int, devices: int) -> Dict[str, object]:
    """A completed v1.0 rank table: one server is ``127.0.0.1``, else distinct ``10.*.*.1`` ids; ranks in order."""
    return {
        "version": "1.0",
        "status": "completed",
        "server_count": str(servers),
        "server_list": [
            {
                "server_id": "127.0.0.1" if servers == 1 else f"10.{s // 250}.{s % 250}.1",
                "device": [
                    {
                        "device_id": str(d),
                        "device_ip": f"192.{s // 250}.{s % 250}.{d + 1}",
                        "rank_id": str(s * devices + d),
                    }
                    for d in range(devices)
                ],
                "host_nic_ip": "reserve",
            }
            for s in range(servers)
        ],
    }


def command(
    kind: str,
    n: int,
    script: Path,
    script_args: Sequence[str],
    scratch: Path,
    mark: str,
    extra_env: Mapping[str, str],
) -> Tuple[List[str], Dict[str, str]]:
    """argv and full environment that start ``script`` on ``n`` ranks with launcher ``kind`` (see module doc)."""
    env_extra = dict(extra_env)
    shim = [PYTHON, "-m", "malaunch.entrypoint", str(script), *script_args]
    if kind.startswith("shim-ranktable@"):  # mounted from a link farm (--baseline): this tree or the baseline's
        argv, env = command("shim-ranktable", n, script, script_args, scratch, mark, extra_env)
        env["PYTHONPATH"] = str(FARMS[kind.split("@", 1)[1]])
        return argv, env
    if kind == "shim-plan-bound":  # the shim's environment, the bound's script (see the module's docstring)
        _, env = command("shim-ranktable", n, script, script_args, scratch, mark, extra_env)
        return [PYTHON, str(WORKERS / "plan_then_fork.py"), str(script), *script_args], env
    if kind == "shim-ranktable":
        table = scratch / "rank_table.json"
        table.write_text(json.dumps(v10_rank_table(1, n)))
        env_extra.update(
            MA_RUN_METHOD="ranktable",
            RANK_TABLE_FILE=str(table),
            MALAUNCH_MASTER_PORT=str(free_port()),
            MALAUNCH_LOG_DIR=str(scratch / "shim-logs"),
        )
        return shim, bench_env(mark, env_extra)
    if kind in _SHIM_LAUNCHERS:
        method, port_variable = _SHIM_LAUNCHERS[kind]
        env_extra.update(
            {
                "MA_RUN_METHOD": method,
                "MA_NUM_GPUS": str(n),
                port_variable: str(free_port()),
                "MALAUNCH_LOG_DIR": str(scratch / "shim-logs"),
            }
        )
        return shim, bench_env(mark, env_extra)
    if kind == "torchrun":
        argv = [
            PYTHON,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nnodes=1",
            f"--nproc_per_node={n}",
            f"--master_port={free_port()}",
            str(script),
            *script_args,
        ]
        return argv, bench_env(mark, env_extra)
    if kind == "msrun":
        argv = [
            PYTHON,
            "-m",
            "mindspore.parallel.cluster.run",
            f"--worker_num={n}",
            f"--local_worker_num={n}",
            "--master_addr=127.0.0.1",
            f"--master_port={free_port()}",
            "--join=True",
            f"--log_dir={scratch / 'msrun-logs'}",
            str(script),
            *script_args,
        ]
        return argv, bench_env(mark, env_extra)
    raise ValueError(f"unknown launcher kind {kind!r}; expected one of {', '.join(SUBJECTS)}")
