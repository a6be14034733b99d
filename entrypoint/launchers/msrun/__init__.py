"""msrun: MindSpore's ``python -m mindspore.parallel.cluster.run`` per host, which starts this host's workers.

Plan: ``--worker_num=N*G --local_worker_num=G --master_addr=IP --master_port=P --node_rank=I --log_dir=D
--join=True --cluster_time_out=T [--rank_table_file=F]``; ``MA_EXTRA_MSRUN_PARAMS`` follow the presets and
replace a preset flag of the same name. msrun starts ``python`` from PATH, so the plan puts a directory whose
``python`` is the shim's interpreter first, and before it the birth folder (``<log dir>/.births``), whose ``python``
(:func:`birth_wrapper`, a file of the plan) records each process's rank as it is born and then runs that
interpreter in its place (:mod:`...run.procs.births`). msrun writes ``worker_N.log`` itself (``log_source="files"``),
and ``--tail_worker_log=-2`` keeps it from copying them to its console: the shim follows them, each line with its
rank prefix.

Run: the workers are watched (msrun's scheduler is not a worker), a worker whose environment is gone (a zombie)
through its birth record; msrun's line "Worker process <pid> exit with exception. Error code: <rc>" is a fact
(the pid's rank: the watch's, else its birth record's); msrun SIGKILLs the peers of a failed worker itself (their
SIGKILL is collateral).
"""


from __future__ import annotations

import os.path
import re
from typing import Dict, List, Optional, Tuple

from ...contract.cluster_env import ClusterEnv
from ...plan.build import log_dir_of, make_plan, merge_flags, node_ranks
from ...plan.inputs import LaunchInputs, Needs
from ...plan.launch_plan import LaunchPlan, ProcessSpec
from ...run.launcher import Launcher, LauncherSays

__all__ = ["MSRUN_MODULE", "MSRUN_TAIL_NONE", "MsrunLauncher", "birth_wrapper", "parse_msrun_failures", "plan_msrun"]

METHOD = "msrun"
MSRUN_MODULE = "mindspore.parallel.cluster.run"
#: ``--tail_worker_log`` names ranks whose logs msrun copies to its console; no rank is ever -2, so msrun
#: tails nothing and the supervisor follows ``worker_N.log`` itself, each line with its rank prefix.
MSRUN_TAIL_NONE = "-2"
_MSRUN_FAILED = rb"Worker process (\d+) exit with exception\. Error code: (-?\d+)"
#: The folder of the birth-record program (``run/procs/births.py``), found by path: the planner imports no module
#: of the run phase, and the program runs in a bare interpreter that imports no package.
_PROCS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "run", "procs")
#: The longest ``#!`` line every Linux kernel takes whole (before 5.1 the kernel read 128 bytes of it).
_SHEBANG_MAX = 127


def parse_msrun_failures(lines: bytes) -> List[Tuple[int, int]]:
    """``(pid, code)`` for each "Worker process <pid> exit with exception. Error code: <rc>." line."""
    if b"exit with exception" not in lines:
        return []
    return [(int(m.group(1)), int(m.group(2))) for m in re.finditer(_MSRUN_FAILED, lines)]


def python_path(inputs: LaunchInputs) -> str:
    """PATH with the directory whose ``python`` is the interpreter first (msrun starts ``python``)."""
    assert inputs.python_dir is not None
    return f"{inputs.python_dir}{os.pathsep}{inputs.path_env}" if inputs.path_env else inputs.python_dir


def birth_wrapper(interpreter: str) -> Optional[str]:
    """The text of the birth folder's ``python``: a ``#!`` script of ``interpreter`` (``-I -S``) that records the birth
    of the process it runs in, in its own folder, and then runs the ``python`` on PATH after it in its place. None when
    ``interpreter`` cannot start a ``#!`` line (blanks or unprintable characters in its path, or a line longer than
    every kernel reads)."""
    line = f"#!{interpreter} -IS"
    if any(char.isspace() for char in interpreter) or not interpreter.isprintable():
        return None
    if len(os.fsencode(line)) > _SHEBANG_MAX:
        return None
    return (
        f"{line}\n"
        "# msrun starts python from PATH: record this process's rank (pid and start time), then run the python\n"
        "# found on PATH after this folder, with the same pid, arguments and environment (malaunch)\n"
        "import sys\n"
        f"sys.path.append({_PROCS_DIR!r})\n"
        "from births import main\n"
        "sys.exit(main(__file__, sys.argv[1:]))\n"
    )


def _births(inputs: LaunchInputs, log_dir: str) -> Tuple[Dict[str, str], Dict[str, str], Optional[str], List[str]]:
    """msrun's PATH, the plan's files, the birth folder and the plan's notes: with the birth folder first on PATH,
    or, when the interpreter cannot start a ``#!`` line, without it (and a note saying so)."""
    folder = os.path.join(log_dir, ".births")
    wrapper = birth_wrapper(inputs.interpreter)
    if wrapper is None:
        note = (f"the interpreter's path {inputs.interpreter!r} cannot start a #! line, so msrun's processes record "
                "no birth: a worker that dies before the shim's first look at it (within 50 ms) is named by pid only")
        return {"PATH": python_path(inputs)}, {}, None, [note]
    path = f"{folder}{os.pathsep}{python_path(inputs)}"
    return {"PATH": path}, {os.path.join(folder, "python"): wrapper}, folder, []


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
    path, files, births, notes = _births(inputs, log_dir)
    proc = ProcessSpec(
        name=METHOD,
        argv=tuple(argv),
        env={**path, "PYTHONUNBUFFERED": "1"},
        cwd=None,
        log_file=os.path.join(log_dir, "msrun.log"),
    )
    rank_logs = {rank: os.path.join(msrun_logs, f"worker_{rank}.log") for rank in node_ranks(cluster)}
    return make_plan(METHOD, cluster, inputs, log_dir, [proc], "files", rank_logs, notes, files, watch_workers=True,
                     births=births)  # fmt: skip


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
