"""Pure planners: ``ClusterEnv`` + resolved facts -> ``LaunchPlan`` for each launch method.

No function here reads ``os.environ``, the clock or the disk; everything that needs I/O (waiting for the rank
table, resolving the master's name, locating the interpreter) is done by :mod:`malaunch.entrypoint.main` first
and handed in as :class:`LaunchInputs`. Flag spellings follow the ModelArts launch modes:

- torchrun, one host: ``--standalone --nnodes=1 --nproc_per_node=G``; N hosts: ``--nnodes=N --nproc_per_node=G
  --node_rank=I --master_addr=A --master_port=P --rdzv_id=J --rdzv_backend=static``. The master port is always
  passed. ``MA_EXTRA_TORCHRUN_PARAMS`` follow the presets and replace a preset flag of the same name.
- msrun: ``--worker_num=N*G --local_worker_num=G --master_addr=IP --master_port=P --node_rank=I --log_dir=D
  --join=True --cluster_time_out=T [--rank_table_file=F]``; ``MA_EXTRA_MSRUN_PARAMS`` work the same way.
- rank table: one process per device of this host's server, each with the Ascend and torch rank variables.

Both launchers run as ``<interpreter> -m <module>`` (the modules behind the ``torchrun`` and ``msrun`` console
scripts), so they always use the shim's own interpreter.
"""


import math
import os.path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from .cluster_env import ClusterEnv, require_master
from .contract import VARIABLES
from .errors import ConfigError
from .plan import LaunchPlan, ProcessSpec
from .rank_table import RankTable
from .rank_table_v1 import CONVERTED_FORMATS, to_v1_text

__all__ = [
    "DEFAULT_RANK_TABLE_PATH",
    "TORCHRUN_ERROR_FILE",
    "LaunchInputs",
    "boot_command",
    "flag_name",
    "merge_flags",
    "plan_launch",
    "resolve_method",
]

TORCHRUN_MODULE = "torch.distributed.run"
MSRUN_MODULE = "mindspore.parallel.cluster.run"
#: Where ModelArts puts the rank table when ``RANK_TABLE_FILE`` is unset.
DEFAULT_RANK_TABLE_PATH = str(VARIABLES["RANK_TABLE_FILE"].default)
#: ``--tail_worker_log`` names ranks whose logs msrun copies to its console; no rank is ever -2, so msrun
#: tails nothing and the supervisor follows ``worker_N.log`` itself, each line with its rank prefix.
MSRUN_TAIL_NONE = "-2"
#: torchrun's own ``TORCHELASTIC_ERROR_FILE`` (in the log directory): the root cause's error file, copied there.
TORCHRUN_ERROR_FILE = "torchrun-error.json"


class LaunchInputs(NamedTuple):
    """Facts gathered by ``main`` before planning (the only non-environment inputs)."""

    boot_file: str  # absolute path
    boot_args: Tuple[str, ...]
    interpreter: str  # the Python that runs the boot file and the launchers
    cwd: str  # the shim's working directory
    hostname: str  # this host's name for reports
    path_env: str  # the PATH the shim inherited
    rank_table: Optional[RankTable] = None
    rank_table_path: Optional[str] = None  # resolved file (also for msrun's rank-table mode)
    server_index: Optional[int] = None
    master_ip: Optional[str] = None  # resolved master address (msrun needs an IP)
    python_dir: Optional[str] = None  # a directory whose ``python`` is ``interpreter`` (msrun starts ``python``)
    notes: Tuple[str, ...] = ()  # facts found while gathering, shown by --dry-run


def resolve_method(cluster: ClusterEnv) -> str:
    """The launch method: ``MA_RUN_METHOD``, or the platform default (rank table if one is given, else single)."""
    if cluster.method:
        return cluster.method
    return "ranktable" if cluster.rank_table_file else "single"


def flag_name(token: str) -> Optional[str]:
    """Normalised name of a ``--flag`` / ``--flag=value`` token (``--a-b`` and ``--a_b`` are the same), else None."""
    if not token.startswith("--") or token == "--":
        return None
    return token[2:].split("=", 1)[0].replace("-", "_")


def merge_flags(presets: Sequence[str], extra: Sequence[str]) -> List[str]:
    """Presets followed by ``extra``; a preset whose flag name appears in ``extra`` is dropped.

    Presets are always single ``--name=value`` or ``--name`` tokens, so dropping one never orphans a value.
    """
    overridden = {name for name in (flag_name(tok) for tok in extra) if name is not None}
    return [tok for tok in presets if flag_name(tok) not in overridden] + list(extra)


def _flag_value(tokens: Sequence[str], name: str) -> Optional[str]:
    """The value given to ``--name`` (either spelling, ``=v`` or `` v``) in ``tokens``; the last one wins."""
    value = None
    for index, token in enumerate(tokens):
        if flag_name(token) == name:
            if "=" in token:
                value = token.split("=", 1)[1]
            elif index + 1 < len(tokens):
                value = tokens[index + 1]
    return value


def boot_command(inputs: LaunchInputs) -> Tuple[str, ...]:
    """argv that runs the boot file once: Python files with ``-u`` (unbuffered), ``.sh`` with bash, else exec."""
    boot = inputs.boot_file
    if boot.endswith(".py"):
        return (inputs.interpreter, "-u", boot, *inputs.boot_args)
    if boot.endswith(".sh"):
        return ("bash", boot, *inputs.boot_args)
    return (boot, *inputs.boot_args)


def _log_dir(cluster: ClusterEnv, inputs: LaunchInputs) -> str:
    if cluster.log_dir:
        return os.path.join(inputs.cwd, cluster.log_dir)
    root = (
        os.path.join(cluster.platform_log_dir, "malaunch")
        if cluster.platform_log_dir
        else os.path.join(inputs.cwd, "malaunch-logs")
    )
    return os.path.join(inputs.cwd, root, f"node-{cluster.node_rank}")


def _host(cluster: ClusterEnv, inputs: LaunchInputs) -> str:
    return cluster.worker_hosts[cluster.node_rank] if cluster.worker_hosts else inputs.hostname


def _node_ranks(cluster: ClusterEnv) -> range:
    per_host = cluster.procs_per_host
    return range(cluster.node_rank * per_host, (cluster.node_rank + 1) * per_host)


def _plan(
    method: str,
    cluster: ClusterEnv,
    inputs: LaunchInputs,
    log_dir: str,
    processes: Sequence[ProcessSpec],
    log_source: str,
    rank_logs: Dict[int, str],
    notes: Sequence[str] = (),
    files: Optional[Dict[str, str]] = None,
    watch_workers: bool = False,
) -> LaunchPlan:
    report = (
        os.path.join(inputs.cwd, cluster.report_file) if cluster.report_file else os.path.join(log_dir, "report.json")
    )
    return LaunchPlan(
        method=method,
        node_rank=cluster.node_rank,
        num_hosts=cluster.num_hosts,
        host=_host(cluster, inputs),
        processes=tuple(processes),
        log_source=log_source,
        log_dir=log_dir,
        rank_logs=rank_logs,
        grace_period=cluster.grace_period,
        report_file=report,
        notes=tuple(notes) + inputs.notes,
        files=files or {},
        watch_workers=watch_workers,
    )


def _plan_single(cluster: ClusterEnv, inputs: LaunchInputs, log_dir: str) -> LaunchPlan:
    log_file = os.path.join(log_dir, "boot.log")
    proc = ProcessSpec(name="boot", argv=boot_command(inputs), env={}, cwd=None, log_file=log_file)
    return _plan("single", cluster, inputs, log_dir, [proc], "pipe", {})


def _plan_torchrun(cluster: ClusterEnv, inputs: LaunchInputs, log_dir: str) -> LaunchPlan:
    per_host = cluster.procs_per_host
    if cluster.num_hosts == 1:
        presets = ["--standalone", "--nnodes=1", f"--nproc_per_node={per_host}"]
    else:
        presets = [
            f"--nnodes={cluster.num_hosts}",
            f"--nproc_per_node={per_host}",
            f"--node_rank={cluster.node_rank}",
            f"--master_addr={require_master(cluster, 'torchrun')}",
        ]
    presets.append(f"--master_port={cluster.torchrun_master_port}")
    if cluster.num_hosts > 1:
        presets += [f"--rdzv_id={cluster.job_id}", "--rdzv_backend=static"]
    # Each worker's stdout/stderr are files it writes itself (nothing is lost when torchrun ends); the shim
    # follows them into rank-N.log and the console, so it can end torchrun as soon as the job starts ending.
    presets += ["--redirects=3", f"--log_dir={os.path.join(log_dir, 'torchrun')}"]
    if not inputs.boot_file.endswith(".py"):
        presets.append("--no_python")
    argv = [inputs.interpreter, "-m", TORCHRUN_MODULE, *merge_flags(presets, cluster.torchrun_extra)]
    script_at = len(argv)
    argv += [inputs.boot_file, *inputs.boot_args]
    proc = ProcessSpec(
        name="torchrun",
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
    rank_logs = {rank: os.path.join(log_dir, f"rank-{rank}.log") for rank in _node_ranks(cluster)}
    restarts = _flag_value(cluster.torchrun_extra, "max_restarts")
    watch = restarts is None or restarts.strip() == "0"  # torchrun restarts failed workers: let it
    notes = [] if watch else [f"--max_restarts={restarts}: torchrun handles worker failures (restarts) itself"]
    return _plan("torchrun", cluster, inputs, log_dir, [proc], "attempt_files", rank_logs, notes, watch_workers=watch)


def _plan_msrun(cluster: ClusterEnv, inputs: LaunchInputs, log_dir: str) -> LaunchPlan:
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
    path = f"{inputs.python_dir}{os.pathsep}{inputs.path_env}" if inputs.path_env else inputs.python_dir
    proc = ProcessSpec(
        name="msrun",
        argv=tuple(argv),
        env={"PATH": path, "PYTHONUNBUFFERED": "1"},
        cwd=None,
        log_file=os.path.join(log_dir, "msrun.log"),
    )
    rank_logs = {rank: os.path.join(msrun_logs, f"worker_{rank}.log") for rank in _node_ranks(cluster)}
    return _plan("msrun", cluster, inputs, log_dir, [proc], "files", rank_logs, watch_workers=True)


def _plan_ranktable(cluster: ClusterEnv, inputs: LaunchInputs, log_dir: str) -> LaunchPlan:
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
    processes = []
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
    return _plan("ranktable", cluster, inputs, log_dir, processes, "pipe", rank_logs, notes, files)


def plan_launch(cluster: ClusterEnv, inputs: LaunchInputs) -> LaunchPlan:
    """Build the launch plan for this host. Pure: same inputs, same plan.

    Raises:
        ConfigError: the method cannot run with these inputs (e.g. a rank table without devices for this host).
    """
    method = resolve_method(cluster)
    log_dir = _log_dir(cluster, inputs)
    if method == "torchrun":
        return _plan_torchrun(cluster, inputs, log_dir)
    if method == "msrun":
        return _plan_msrun(cluster, inputs, log_dir)
    if method == "ranktable":
        return _plan_ranktable(cluster, inputs, log_dir)
    if method == "single":
        return _plan_single(cluster, inputs, log_dir)
    raise ConfigError("MA_RUN_METHOD", method, f"expected {', '.join(VARIABLES['MA_RUN_METHOD'].choices)}")
