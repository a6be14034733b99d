"""Read the platform's environment contract into a ``ClusterEnv``: a pure function of a ``Mapping``.

Nothing here touches ``os.environ``, the network or the disk. Every variable is validated at once and a bad
value raises :class:`~malaunch.entrypoint.contract.errors.ConfigError` naming the variable, its value and what is
expected. Names, kinds, bounds, defaults and aliases come from the contract table
(:mod:`~malaunch.entrypoint.contract`), and every value is parsed by its helpers; ``docs/entrypoint.md``'s table
is checked against that table.

Numbers are ASCII only: a whole number is ``-?[0-9]+`` (at most 9 digits) and seconds are ``[0-9]+(.[0-9]+)?``;
``1_0``, ``+3``, Arabic-Indic or full-width digits are refused although ``int()`` takes them.
``MA_NUM_HOSTS`` and ``MA_NUM_GPUS`` have upper bounds (:data:`MAX_NUM_HOSTS`, :data:`MAX_NUM_GPUS`), checked here,
before anything is written.
"""

from __future__ import annotations

from typing import Mapping, Optional, Tuple

from . import VARIABLES, int_bounds, parse_bool, parse_choice, parse_int, parse_seconds, parse_words, seconds_default
from . import raw_value as _get
from .errors import ConfigError

__all__ = [
    "DEFAULT_GRACE_PERIOD",
    "DEFAULT_MSRUN_MASTER_PORT",
    "DEFAULT_RANKTABLE_MASTER_PORT",
    "DEFAULT_TORCHRUN_MASTER_PORT",
    "MAX_NUM_GPUS",
    "MAX_NUM_HOSTS",
    "RUN_METHODS",
    "ClusterEnv",
    "parse_cluster_env",
    "require_master",
]


def _default(name: str) -> int:
    default = VARIABLES[name].default
    assert isinstance(default, int)
    return default


def _maximum(name: str) -> int:
    maximum = int_bounds(name)[1]
    assert maximum is not None
    return maximum


#: Accepted values of ``MA_RUN_METHOD``; unset or empty means the platform default.
RUN_METHODS = VARIABLES["MA_RUN_METHOD"].choices
DEFAULT_TORCHRUN_MASTER_PORT = _default("MA_TORCHRUN_MASTER_PORT")
DEFAULT_MSRUN_MASTER_PORT = _default("MA_MSRUN_MASTER_PORT")
DEFAULT_RANKTABLE_MASTER_PORT = _default("MALAUNCH_MASTER_PORT")
DEFAULT_GRACE_PERIOD = seconds_default("MALAUNCH_GRACE_PERIOD")
#: Upper bound of ``MA_NUM_GPUS`` (devices per host; Ascend servers have 8 or 16): the SDK's bound of
#: ``resources.devices_per_host``, so that every job the SDK accepts starts.
MAX_NUM_GPUS = _maximum("MA_NUM_GPUS")
#: Upper bound of ``MA_NUM_HOSTS`` (a 32,768-rank job is 2,048 hosts of 16 devices).
MAX_NUM_HOSTS = _maximum("MA_NUM_HOSTS")


class ClusterEnv:
    """What the platform told this container, validated. All fields are plain data; frozen.

    A slotted class rather than a named tuple or a dataclass: it is built before the first rank starts, and
    defining a 25-field named tuple or dataclass costs more start-up time than the whole class below.
    """

    __slots__ = (
        "current_host_ip",
        "current_instance_name",
        "device_workdir",
        "devices_per_host",
        "grace_period",
        "job_id",
        "log_dir",
        "master_addr",
        "master_wait",
        "method",
        "min_hosts",
        "msrun_cluster_time_out",
        "msrun_extra",
        "msrun_master_port",
        "msrun_rank_table",
        "node_rank",
        "num_hosts",
        "platform_log_dir",
        "rank_table_file",
        "rank_table_timeout",
        "ranktable_master_port",
        "report_file",
        "script_interpreter",
        "torchrun_extra",
        "torchrun_master_port",
        "worker_hosts",
    )

    method: str  # "" (platform default), "ranktable", "torchrun" or "msrun"
    num_hosts: int
    devices_per_host: int  # MA_NUM_GPUS; 0 means "no accelerators": one process per host
    node_rank: int
    worker_hosts: Tuple[str, ...]
    master_addr: Optional[str]  # None: unknown (several hosts, no VC_WORKER_HOSTS / MA_VJ_NAME+MA_TASK_NAME)
    job_id: str
    rank_table_file: Optional[str]
    torchrun_master_port: int
    torchrun_extra: Tuple[str, ...]
    msrun_master_port: int
    msrun_extra: Tuple[str, ...]
    msrun_cluster_time_out: int
    msrun_rank_table: bool
    ranktable_master_port: int
    current_host_ip: Optional[str]
    current_instance_name: Optional[str]
    device_workdir: Optional[str]
    script_interpreter: Optional[str]
    grace_period: float
    log_dir: Optional[str]
    platform_log_dir: Optional[str]
    report_file: Optional[str]
    rank_table_timeout: float
    master_wait: float
    min_hosts: Optional[int]  # MALAUNCH_MIN_HOSTS (torchrun only): elastic down to this many hosts; None: not elastic

    def __init__(
        self,
        *,
        method: str,
        num_hosts: int,
        devices_per_host: int,
        node_rank: int,
        worker_hosts: Tuple[str, ...],
        master_addr: Optional[str],
        job_id: str,
        rank_table_file: Optional[str],
        torchrun_master_port: int,
        torchrun_extra: Tuple[str, ...],
        msrun_master_port: int,
        msrun_extra: Tuple[str, ...],
        msrun_cluster_time_out: int,
        msrun_rank_table: bool,
        ranktable_master_port: int,
        current_host_ip: Optional[str],
        current_instance_name: Optional[str],
        device_workdir: Optional[str],
        script_interpreter: Optional[str],
        grace_period: float,
        log_dir: Optional[str],
        platform_log_dir: Optional[str],
        report_file: Optional[str],
        rank_table_timeout: float,
        master_wait: float,
        min_hosts: Optional[int] = None,
    ) -> None:
        given = locals()
        for name in ClusterEnv.__slots__:
            object.__setattr__(self, name, given[name])

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ClusterEnv is frozen: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ClusterEnv is frozen: cannot delete {name!r}")

    def _values(self) -> Tuple[object, ...]:
        return tuple(getattr(self, name) for name in ClusterEnv.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClusterEnv) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in ClusterEnv.__slots__)
        return f"ClusterEnv({shown})"

    @property
    def procs_per_host(self) -> int:
        """Processes a launcher starts per host: one per device, or one when there is no accelerator."""
        return max(self.devices_per_host, 1)


def _node_rank(environ: Mapping[str, str], num_hosts: int) -> int:
    primary = _get(environ, "VC_TASK_INDEX")
    alias = _get(environ, "MA_TASK_INDEX")
    name = "VC_TASK_INDEX" if primary is not None or alias is None else "MA_TASK_INDEX"
    rank = parse_int(environ, name)
    if primary is not None and alias is not None and parse_int(environ, "MA_TASK_INDEX") != rank:
        raise ConfigError("MA_TASK_INDEX", alias, f"expected the same value as VC_TASK_INDEX={primary}")
    if rank >= num_hosts:
        raise ConfigError(
            name, str(rank), f"expected an index below MA_NUM_HOSTS={num_hosts} (0 to {num_hosts - 1})"
        )
    return rank


def _worker_hosts(environ: Mapping[str, str], num_hosts: int) -> Tuple[str, ...]:
    raw = _get(environ, "VC_WORKER_HOSTS")
    if raw is None:
        return ()
    hosts = tuple(part.strip() for part in raw.split(","))
    if any(not host or any(ch.isspace() for ch in host) for host in hosts):
        raise ConfigError("VC_WORKER_HOSTS", raw, "expected comma-separated host names with no empty entries")
    if len(hosts) != num_hosts:
        raise ConfigError(
            "VC_WORKER_HOSTS",
            raw,
            f"expected {num_hosts} host names (MA_NUM_HOSTS={num_hosts}), got {len(hosts)}",
        )
    return hosts


def _master_addr(environ: Mapping[str, str], hosts: Tuple[str, ...], num_hosts: int) -> Optional[str]:
    if hosts:
        return hosts[0]
    vj_name = _get(environ, "MA_VJ_NAME")
    task_name = _get(environ, "MA_TASK_NAME")
    if vj_name is not None and task_name is not None:
        return f"{vj_name}-{task_name}-0.{vj_name}"
    if num_hosts == 1:
        return "127.0.0.1"
    return None


def _min_hosts(environ: Mapping[str, str], num_hosts: int) -> Optional[int]:
    raw = _get(environ, "MALAUNCH_MIN_HOSTS")
    if raw is None:
        return None
    value = parse_int(environ, "MALAUNCH_MIN_HOSTS")  # its method is checked with the rest (config.py)
    if value > num_hosts:
        raise ConfigError("MALAUNCH_MIN_HOSTS", raw, f"expected at most MA_NUM_HOSTS={num_hosts} (1 to {num_hosts})")
    return value


def require_master(cluster: ClusterEnv, method: str) -> str:
    """The master's address for ``method`` (torchrun or msrun on several hosts), which cannot run without one.

    Raises:
        ConfigError: the environment named no master (the rank-table fan-out needs none: HCCL reads the table).
    """
    if cluster.master_addr is None:
        raise ConfigError(
            "VC_WORKER_HOSTS",
            "",
            f"{method} with MA_NUM_HOSTS={cluster.num_hosts} needs the master's address: set VC_WORKER_HOSTS, or "
            "MA_VJ_NAME and MA_TASK_NAME",
        )
    return cluster.master_addr


def parse_cluster_env(environ: Mapping[str, str]) -> ClusterEnv:
    """Validate the platform variables in ``environ`` and return them as a :class:`ClusterEnv`.

    Raises:
        ConfigError: the first invalid variable, with its value and what is expected.
    """
    method = parse_choice(environ, "MA_RUN_METHOD")
    num_hosts = parse_int(environ, "MA_NUM_HOSTS")
    devices = parse_int(environ, "MA_NUM_GPUS")
    node_rank = _node_rank(environ, num_hosts)
    hosts = _worker_hosts(environ, num_hosts)
    master = _master_addr(environ, hosts, num_hosts)
    return ClusterEnv(
        method=method,
        num_hosts=num_hosts,
        devices_per_host=devices,
        node_rank=node_rank,
        worker_hosts=hosts,
        master_addr=master,
        job_id=_get(environ, "MA_VJ_NAME") or "malaunch-job",
        rank_table_file=_get(environ, "RANK_TABLE_FILE"),
        torchrun_master_port=parse_int(environ, "MA_TORCHRUN_MASTER_PORT"),
        torchrun_extra=parse_words(environ, "MA_EXTRA_TORCHRUN_PARAMS"),
        msrun_master_port=parse_int(environ, "MA_MSRUN_MASTER_PORT"),
        msrun_extra=parse_words(environ, "MA_EXTRA_MSRUN_PARAMS"),
        msrun_cluster_time_out=parse_int(environ, "MSRUN_CLUSTER_TIME_OUT"),
        msrun_rank_table=parse_bool(environ, "MS_RANKTABLE_ENABLE"),
        ranktable_master_port=parse_int(environ, "MALAUNCH_MASTER_PORT"),
        current_host_ip=_get(environ, "MA_CURRENT_HOST_IP"),
        current_instance_name=_get(environ, "MA_CURRENT_INSTANCE_NAME"),
        device_workdir=_get(environ, "MALAUNCH_DEVICE_WORKDIR"),
        script_interpreter=_get(environ, "MA_SCRIPT_INTERPRETER"),
        grace_period=parse_seconds(environ, "MALAUNCH_GRACE_PERIOD"),
        log_dir=_get(environ, "MALAUNCH_LOG_DIR"),
        platform_log_dir=_get(environ, "MA_LOG_DIR"),
        report_file=_get(environ, "MALAUNCH_REPORT_FILE"),
        rank_table_timeout=parse_seconds(environ, "MALAUNCH_RANK_TABLE_TIMEOUT"),
        master_wait=parse_seconds(environ, "MALAUNCH_MASTER_WAIT"),
        min_hosts=_min_hosts(environ, num_hosts),
    )
