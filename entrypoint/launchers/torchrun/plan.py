"""torchrun's plan: one ``python -m torch.distributed.run`` per host that starts this host's ranks.

Plan (flag spellings of the ModelArts launch modes): one host: ``--standalone --nnodes=1 --nproc_per_node=G``;
N hosts: ``--nnodes=N --nproc_per_node=G --node_rank=I --master_addr=A --master_port=P --rdzv_id=J
--rdzv_backend=static``. The master port is always passed (elastic: in the endpoint). With ``MALAUNCH_MIN_HOSTS``: c10d
rendezvous at the master host (:mod:`.elastic`). ``MA_EXTRA_TORCHRUN_PARAMS`` follow the presets and
replace a preset flag of the same name. Every worker writes its own stdout/stderr files (``--redirects=3
--log_dir``), which :mod:`.logs` follows into ``rank-N.log``.

Run: the workers are watched (their attempt from :data:`~.stub.LAUNCHER_COUNT`, else torchrun's
``TORCHELASTIC_RESTART_COUNT``); torchrun's agent line ``failed (exitcode:`` starts its teardown chatter; its
failure summary (:mod:`.summary`) and the workers' error files (:mod:`.errors`) are facts.

Attempts: the shim's loop makes every attempt, each a torchrun of its own with ``--max_restarts=0`` whose workers
start through the stub (:mod:`.stub`) with the real counters. Only a ``--max_restarts`` the user put in
``MA_EXTRA_TORCHRUN_PARAMS`` lets torchrun restart by itself: then the loop runs it once and the gate
(:mod:`.gate`) applies ``restart_on`` to every torchrun attempt.
"""

from __future__ import annotations

import math
import os.path
from typing import List, Tuple

from ...contract.cluster_env import ClusterEnv, require_master
from ...contract.config import RestartPolicy
from ...plan.build import flag_value, log_dir_of, make_plan, merge_flags, node_ranks
from ...plan.inputs import LaunchInputs, Needs
from ...plan.launch_plan import LaunchPlan, ProcessSpec
from ...run.launcher import Launcher
from .elastic import elastic_presets, is_elastic, members_argv
from .stub import LAUNCHER_COUNT, attempt_argv

__all__ = ["METHOD", "MONITOR_INTERVAL", "TORCHRUN_ERROR_FILE", "TORCHRUN_MODULE", "TorchrunPlanner", "plan_torchrun"]

METHOD = "torchrun"
TORCHRUN_MODULE = "torch.distributed.run"
#: torchrun's own ``TORCHELASTIC_ERROR_FILE`` (in the log directory): the root cause's error file, copied there.
TORCHRUN_ERROR_FILE = "torchrun-error.json"
#: Seconds between torchrun's looks at its workers (``--monitor_interval``; see :func:`plan_torchrun`).
MONITOR_INTERVAL = 1


def plan_torchrun(cluster: ClusterEnv, inputs: LaunchInputs, log_dir: str) -> LaunchPlan:
    """This host's torchrun plan. Pure."""
    per_host = cluster.procs_per_host
    elastic = cluster.min_hosts is not None and cluster.num_hosts > 1
    if cluster.num_hosts == 1:
        presets = ["--standalone", "--nnodes=1", f"--nproc_per_node={per_host}"]
    elif elastic:
        presets = elastic_presets(cluster, METHOD)
    else:
        presets = [
            f"--nnodes={cluster.num_hosts}",
            f"--nproc_per_node={per_host}",
            f"--node_rank={cluster.node_rank}",
            f"--master_addr={require_master(cluster, METHOD)}",
        ]
    if not elastic:  # elastic: the rendezvous endpoint names the port
        presets.append(f"--master_port={cluster.torchrun_master_port}")
    if cluster.num_hosts > 1 and not elastic:
        presets += [f"--rdzv_id={cluster.job_id}", "--rdzv_backend=static"]
    # Each worker's stdout/stderr are files it writes itself (nothing is lost when torchrun ends); the shim
    # follows them into rank-N.log and the console, so it can end torchrun as soon as the job starts ending.
    presets += ["--redirects=3", f"--log_dir={os.path.join(log_dir, 'torchrun')}"]
    # torchrun's agent looks at its workers every monitor interval (0.1 s by default) and, at a failure, stops the
    # others itself. The shim sees a worker's death at once (a pidfd) and pauses torchrun to judge it; a 0.1 s
    # tick can come first on a busy machine, and its stop then kills a rank still on its way to its own exit
    # code (the real failure, lost). One second leaves the shim ten times the margin; a job's success is seen up
    # to that much later. The user's own --monitor_interval wins.
    presets.append(f"--monitor_interval={MONITOR_INTERVAL}")
    if not inputs.boot_file.endswith(".py"):
        presets.append("--no_python")
    argv = [inputs.interpreter, "-m", TORCHRUN_MODULE, *merge_flags(presets, cluster.torchrun_extra)]
    script_at = len(argv)
    argv += [inputs.boot_file, *inputs.boot_args]
    proc = ProcessSpec(
        name=METHOD,
        argv=tuple(argv),
        script_at=script_at,
        env={
            # torchrun's own @record copies the root-cause worker's error file here (with its exit code), when it
            # gets to write its summary (the supervisor usually ends torchrun before: see its contract).
            "TORCHELASTIC_ERROR_FILE": os.path.join(log_dir, TORCHRUN_ERROR_FILE),
        },
        env_defaults={
            "PYTHONUNBUFFERED": "1",  # live output from workers that start more Pythons (or a .sh boot file)
            "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": str(max(1, math.ceil(cluster.grace_period))),
        },
        cwd=None,
        log_file=os.path.join(log_dir, "torchrun.log"),
    )
    rank_logs = {rank: os.path.join(log_dir, f"rank-{rank}.log") for rank in node_ranks(cluster)}
    restarts = flag_value(cluster.torchrun_extra, "max_restarts")
    watch = restarts is None or restarts.strip() == "0"  # torchrun restarts failed workers: let it
    notes = [] if watch else [f"--max_restarts={restarts}: torchrun handles worker failures (restarts) itself"]
    return make_plan(METHOD, cluster, inputs, log_dir, [proc], "attempt_files", rank_logs, notes, watch_workers=watch)


def _restarts_itself(plan: LaunchPlan) -> bool:
    """The user gave torchrun ``--max_restarts`` (``MA_EXTRA_TORCHRUN_PARAMS``): the plan does not watch its
    workers' failures, torchrun restarts them."""
    return not plan.watch_workers


def _own_restarts_plan(plan: LaunchPlan, policy: RestartPolicy) -> LaunchPlan:
    """torchrun restarts its worker group itself (the user's ``--max_restarts``, later on the command line,
    wins over the ``--max_restarts=N`` put right after the module name)."""
    restarts = 0 if policy.restart_on == "never" else policy.max_restarts
    processes: List[ProcessSpec] = []
    for spec in plan.processes:
        argv = list(spec.argv)
        if spec.name == METHOD and len(argv) >= 3 and argv[1] == "-m":
            argv.insert(3, f"--max_restarts={restarts}")
        processes.append(spec._replace(argv=tuple(argv)))
    note = "torchrun restarts the worker group itself (--max_restarts in MA_EXTRA_TORCHRUN_PARAMS)"
    # ``always``: torchrun's own rule already; ``never``: no restarts to judge
    restart_on = None if policy.restart_on in ("always", "never") else policy.restart_on
    return plan._replace(processes=tuple(processes), restart_on=restart_on, notes=(*plan.notes, note))


class TorchrunPlanner(Launcher):
    """The torchrun method's planning hooks (its run hooks: :class:`.launcher.TorchrunLauncher`)."""

    method = METHOD
    starts_workers = True
    attempt_variables = (LAUNCHER_COUNT, "TORCHELASTIC_RESTART_COUNT")
    reroots_env = True  # torchrun's own error file goes into the attempt's folder too

    def needs(self, cluster: ClusterEnv) -> Needs:
        return Needs(master=cluster.num_hosts > 1)

    def plan(self, cluster: ClusterEnv, inputs: LaunchInputs) -> LaunchPlan:
        return plan_torchrun(cluster, inputs, log_dir_of(cluster, inputs))

    def plan_attempt(self, plan: LaunchPlan, attempt: int, policy: RestartPolicy) -> LaunchPlan:
        if policy.max_restarts > 0 and _restarts_itself(plan):
            return _own_restarts_plan(plan, policy)
        return super().plan_attempt(plan, attempt, policy)

    def attempt_argv(self, spec: ProcessSpec, attempt: int, most: int) -> Tuple[str, ...]:
        return attempt_argv(spec.argv, spec.script_at, attempt, most)

    def plan_members(self, plan: LaunchPlan, attempt: int, members: int) -> LaunchPlan:
        processes = tuple(
            spec._replace(argv=members_argv(spec.argv, attempt, members))
            if spec.name == METHOD and is_elastic(spec.argv) else spec
            for spec in plan.processes
        )
        return plan._replace(processes=processes)

    def attempt_limit(self, plan: LaunchPlan, policy: RestartPolicy) -> int:
        return 1 if _restarts_itself(plan) else policy.max_restarts + 1

    def restarts_workers(self, plan: LaunchPlan) -> bool:
        return _restarts_itself(plan)
