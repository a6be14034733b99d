"""The environment contract's rows: every variable the shim reads or sets (see the package's docstring).

Standard library only, and cheap to import: it is read before the first rank starts.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Mapping, Optional, Tuple, Union

if TYPE_CHECKING:
    Default = Union[int, float, bool, str, None]

__all__ = ["ALIASES", "KINDS", "ROLES", "SETTERS", "VARIABLES", "Name", "Variable", "without_secret"]

#: How a variable's text is read. ``int``/``port``/``seconds``/``bool`` have parse helpers here; ``choice``
#: is one of ``choices`` (case-insensitive); ``words`` is shell-split; ``hosts`` comma-separated names;
#: ``codes`` a restart choice or exit codes; ``text``/``path`` are taken as they are.
KINDS = ("int", "port", "seconds", "bool", "choice", "words", "hosts", "codes", "text", "path")
ROLES = ("input", "output", "both")
SETTERS = ("platform", "sdk", "user", "shim")


class Variable:
    """One row of the contract; plain frozen data (a slotted class: cheaper to define than a named tuple)."""

    __slots__ = ("aliases", "choices", "default", "kind", "maximum", "meaning", "minimum", "name", "role",
                 "sdk_field", "set_by")

    name: str
    kind: str
    role: str
    set_by: Tuple[str, ...]
    default: Default
    minimum: Union[int, float, None]
    maximum: Union[int, float, None]
    aliases: Tuple[str, ...]
    choices: Tuple[str, ...]
    sdk_field: Optional[str]  # the job file's field; "" when the backend sets it itself; None: not from the SDK
    meaning: str

    def __init__(
        self,
        name: str,
        kind: str,
        role: str,
        set_by: Tuple[str, ...],
        meaning: str,
        *,
        default: Default = None,
        minimum: Union[int, float, None] = None,
        maximum: Union[int, float, None] = None,
        aliases: Tuple[str, ...] = (),
        choices: Tuple[str, ...] = (),
        sdk_field: Optional[str] = None,
    ) -> None:
        given = locals()
        for slot in Variable.__slots__:
            object.__setattr__(self, slot, given[slot])

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Variable is frozen: cannot set {name!r}")

    def __repr__(self) -> str:
        return f"Variable({self.name!r}, kind={self.kind!r}, role={self.role!r})"

    @property
    def reads(self) -> bool:
        """The shim reads this variable."""
        return self.role in ("input", "both")

    @property
    def sets(self) -> bool:
        """The shim sets this variable in (some of) the processes it starts."""
        return self.role in ("output", "both")


_P, _S, _U, _SH = ("platform",), ("sdk",), ("user",), ("shim",)
_PS = ("platform", "sdk")
_ROWS = (
    # ---- inputs: the platform's topology
    Variable("MA_RUN_METHOD", "choice", "input", _PS, "how to start the boot file; unset: fan-out with a rank "
             "table, else the boot file once", choices=("ranktable", "torchrun", "msrun"), sdk_field="run_method"),
    Variable("MA_NUM_HOSTS", "int", "input", _PS, "hosts in the job", default=1, minimum=1, maximum=16384,
             sdk_field="resources.hosts"),
    Variable("MA_NUM_GPUS", "int", "input", _PS, "accelerators per host (0: one process per host)", default=0,
             minimum=0, maximum=1024, sdk_field="resources.devices_per_host"),
    Variable("VC_TASK_INDEX", "int", "input", _PS, "this host's index (below MA_NUM_HOSTS)", default=0, minimum=0,
             aliases=("MA_TASK_INDEX",), sdk_field=""),
    Variable("VC_WORKER_HOSTS", "hosts", "input", _PS, "host names in index order; the first is the master",
             sdk_field=""),
    Variable("MA_VJ_NAME", "text", "input", _PS, "Volcano job name: the master's name with MA_TASK_NAME, "
             "torchrun's --rdzv_id (malaunch-job when unset)", sdk_field=""),
    Variable("MA_TASK_NAME", "text", "input", _PS, "Volcano task name", sdk_field=""),
    Variable("RANK_TABLE_FILE", "path", "both", ("platform", "sdk", "shim"), "the Ascend rank table (a file, or a "
             "folder holding jobstart_hccl.json); the fan-out gives each rank the file it read (or its v1.0 "
             "conversion)", default="/user/config/jobstart_hccl.json", sdk_field=""),
    Variable("MA_CURRENT_HOST_IP", "text", "input", _PS, "this host's IP: picks its rank-table server",
             sdk_field=""),
    Variable("MA_CURRENT_INSTANCE_NAME", "text", "input", _PS, "this pod's name: picks its server by pod_name",
             sdk_field=""),
    # ---- inputs: launcher knobs
    Variable("MA_TORCHRUN_MASTER_PORT", "port", "input", _PS, "torchrun --master_port", default=18888, minimum=1,
             maximum=65535, sdk_field="launcher.master_port"),
    Variable("MA_EXTRA_TORCHRUN_PARAMS", "words", "input", ("platform", "sdk", "user"), "extra torchrun flags",
             sdk_field="launcher.torchrun_extra_params"),
    Variable("MA_MSRUN_MASTER_PORT", "port", "input", _PS, "msrun --master_port", default=8118, minimum=1,
             maximum=65535, sdk_field="launcher.msrun_master_port"),
    Variable("MA_EXTRA_MSRUN_PARAMS", "words", "input", ("platform", "sdk", "user"), "extra msrun flags",
             sdk_field="launcher.msrun_extra_params"),
    Variable("MSRUN_CLUSTER_TIME_OUT", "int", "input", _PS, "msrun --cluster_time_out in seconds (-1: forever)",
             default=600, minimum=-1, sdk_field="launcher.msrun_cluster_time_out"),
    Variable("MS_RANKTABLE_ENABLE", "bool", "input", _PS, "pass the rank table to msrun", default=False,
             sdk_field="launcher.msrun_rank_table"),
    Variable("MA_SCRIPT_INTERPRETER", "path", "input", _P, "the Python that runs the boot file and launchers"),
    # ---- inputs: where things go, how long to wait
    Variable("MA_LOG_DIR", "path", "input", _PS, "the platform's log folder (the shim logs under malaunch/)",
             sdk_field=""),
    Variable("MALAUNCH_LOG_DIR", "path", "input", ("sdk", "user"), "this host's log folder (--log-dir)",
             sdk_field=""),
    Variable("MALAUNCH_REPORT_FILE", "path", "input", ("sdk", "user"), "the JSON run report (--report-file)",
             sdk_field=""),
    Variable("MALAUNCH_GRACE_PERIOD", "seconds", "input", ("sdk", "user"), "seconds from SIGTERM to SIGKILL "
             "(--grace-period)", default=30.0, minimum=0, sdk_field="launcher.grace_period"),
    Variable("MALAUNCH_MASTER_PORT", "port", "input", _S, "MASTER_PORT given to rank-table processes",
             default=29500, minimum=1, maximum=65535, sdk_field="launcher.master_port"),
    Variable("MALAUNCH_DEVICE_WORKDIR", "path", "input", _U, "fan-out: run device i in <dir>/device<i>"),
    Variable("MALAUNCH_RANK_TABLE_TIMEOUT", "seconds", "input", _U, "how long to wait for a completed rank table",
             default=600.0, minimum=0),
    Variable("MALAUNCH_MASTER_WAIT", "seconds", "input", _U, "how long to wait for the master's name to resolve",
             default=300.0, minimum=0),
    # ---- inputs: restarts and MindSpore recovery
    Variable("MA_MAX_RESTARTS", "int", "input", _S, "group restarts after an accepted failure", default=0,
             minimum=0, maximum=1000, sdk_field="launcher.max_restarts"),
    Variable("MALAUNCH_RESTART_ON", "codes", "input", _S, "which failures restart: a word or exit codes 1-255",
             default="retryable", choices=("retryable", "always", "never"), sdk_field="launcher.restart_on"),
    Variable("MALAUNCH_RESTART_BACKOFF", "seconds", "input", _U, "seconds before the first restart (doubles)",
             default=1.0, minimum=0, maximum=3600),
    Variable("MS_ENABLE_RECOVERY", "bool", "both", ("user", "shim"), "with msrun: the shim starts MindSpore's "
             "processes itself and relaunches a failed one (set to 1 in each of them)", default=False),
    Variable("MS_RECOVERY_PATH", "path", "both", ("user", "shim"), "MindSpore recovery files (default "
             "<log dir>/ms_recovery), given to every process"),
    Variable("MALAUNCH_MS_RECOVERY_DELAY", "seconds", "input", _U, "seconds between a failure and its relaunch",
             default=30.0, minimum=0, maximum=3600),
    # ---- inputs: the hosts' coordinator (multi-host)
    Variable("MALAUNCH_COORDINATOR", "bool", "input", _U, "multi-host: join the job's coordinator (False: every "
             "host on its own, no restarts together, a lost host unnoticed)", default=True),
    Variable("MALAUNCH_COORDINATOR_PORT", "port", "input", _S, "the master host's shim serves the job's coordinator "
             "on this port; the others join it", default=29510, minimum=1, maximum=65535,
             sdk_field="launcher.coordinator_port"),
    Variable("MALAUNCH_JOB_SECRET", "text", "input", _S, "the job's secret: every coordinator message carries an "
             "HMAC made with it (never printed, never given to the ranks); unset: the job's name", sdk_field=""),
    Variable("MALAUNCH_HEARTBEAT_TIMEOUT", "seconds", "input", ("sdk", "user"), "a host silent this long is lost",
             default=20.0, minimum=1, maximum=3600, sdk_field="launcher.heartbeat_timeout"),
    Variable("MALAUNCH_HOST_WAIT", "seconds", "input", ("sdk", "user"), "how long the others wait for a lost host "
             "to come back before they exit 75", default=120.0, minimum=0, maximum=86400,
             sdk_field="launcher.host_wait"),
    Variable("MALAUNCH_MIN_HOSTS", "int", "input", ("sdk", "user"), "torchrun only: elastic, the job goes on with at "
             "least this many hosts (1..MA_NUM_HOSTS; unset: not elastic)", minimum=1, maximum=16384,
             sdk_field="launcher.min_hosts"),
    # ---- inputs: hangs
    Variable("MALAUNCH_HANG_TIMEOUT", "seconds", "input", ("sdk", "user"), "an attempt whose ranks (every host's) "
             "wrote no output and touched no progress file this long is hung: it ends with class hang (0: off)",
             default=0.0, minimum=0, maximum=86400, sdk_field="launcher.hang_timeout"),
    # ---- inputs: notifications
    Variable("MALAUNCH_NOTIFY", "text", "input", _S, "JSON: the job's notification targets (webhooks, commands), "
             "the events each wants and the timeout; host 0's shim sends the job's events (secrets stay in the "
             "variables the targets name)", sdk_field="notify"),
    # ---- inputs: checkpoints (docs/recovery.md#checkpoints)
    Variable("MALAUNCH_CHECKPOINT_DIR", "path", "input", ("sdk", "user"), "the checkpoint folder: one sub-folder per "
             "checkpoint, complete once it holds .complete (made at start; not writable: exit 2)",
             sdk_field="checkpoint"),
    Variable("MALAUNCH_CHECKPOINT_KEEP", "int", "input", ("sdk", "user"), "complete checkpoints kept in "
             "MALAUNCH_CHECKPOINT_DIR (older ones go between attempts)", default=2, minimum=1, maximum=1000,
             sdk_field="checkpoint.keep"),
    Variable("MALAUNCH_RESUME_SOURCE", "path", "input", ("sdk", "user"), "with MALAUNCH_CHECKPOINT_DIR: another "
             "job's complete checkpoint folder, or its checkpoint folder (the newest complete one is meant), given as "
             "MALAUNCH_RESUME_FROM until the job's own folder holds a complete one (none: exit 2)",
             sdk_field="resume_from"),
    # ---- inputs: prepare steps (docs/entrypoint.md#prepare-steps)
    Variable("MALAUNCH_PREPARE", "text", "input", ("sdk", "user"), "JSON: a list of commands, each an argv (a list "
             "of strings, never a shell string), that every host runs in order before attempt 0, and a replaced "
             "host before it joins; the hosts' attempt 0 starts together once every host prepared",
             sdk_field="launcher.prepare"),
    Variable("MALAUNCH_PREPARE_TIMEOUT", "seconds", "input", ("sdk", "user"), "how long one host's prepare steps "
             "(all of them) may take: the running one is killed (its process group) and the job ends",
             default=3600.0, minimum=1, maximum=86400, sdk_field="launcher.prepare_timeout"),
    # ---- passed through, not read
    Variable("VC_WORKER_NUM", "int", "input", _PS, "hosts (Volcano); not read by the shim",
             sdk_field="resources.hosts"),
    Variable("MA_JOB_DIR", "path", "input", _PS, "parent folder of the code; not read by the shim", sdk_field=""),
    Variable("MALAUNCH_JOB_ID", "text", "input", _S, "the SDK's job id; not read by the shim", sdk_field=""),
    # ---- outputs: what the shim sets in the processes it starts
    Variable("PATH", "path", "output", ("platform", "shim"), "msrun and MindSpore processes: the inherited PATH "
             "with the shim's interpreter folder first"),
    Variable("RANK_ID", "int", "output", _SH, "fan-out / recovery: the rank"),
    Variable("RANK_SIZE", "int", "output", _SH, "fan-out / recovery: ranks in the job"),
    Variable("ASCEND_DEVICE_ID", "int", "output", _SH, "fan-out: the logical device on this server"),
    Variable("DEVICE_ID", "int", "output", _SH, "fan-out / recovery: the logical device on this server"),
    Variable("RANK", "int", "output", _SH, "fan-out: the rank"),
    Variable("LOCAL_RANK", "int", "output", _SH, "fan-out: the rank on this host"),
    Variable("WORLD_SIZE", "int", "output", _SH, "fan-out: ranks in the job"),
    Variable("LOCAL_WORLD_SIZE", "int", "output", _SH, "fan-out: ranks on this host"),
    Variable("MASTER_ADDR", "text", "output", _SH, "fan-out: the master, when known"),
    Variable("MASTER_PORT", "port", "output", _SH, "fan-out: MALAUNCH_MASTER_PORT, when the master is known"),
    Variable("TORCHELASTIC_ERROR_FILE", "path", "output", _SH, "torchrun: its own error file"),
    Variable("PYTHONUNBUFFERED", "text", "output", _SH, "torchrun (unless set), msrun, recovery: 1"),
    Variable("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "int", "output", _SH, "torchrun (unless set): the grace period"),
    Variable("MS_ROLE", "text", "output", _SH, "recovery: MS_SCHED or MS_WORKER"),
    Variable("MS_SCHED_HOST", "text", "output", _SH, "recovery: the scheduler's IP"),
    Variable("MS_SCHED_PORT", "port", "output", _SH, "recovery: MA_MSRUN_MASTER_PORT"),
    Variable("MS_WORKER_NUM", "int", "output", _SH, "recovery: workers in the job"),
    Variable("MS_NODE_ID", "int", "output", _SH, "recovery: the worker's rank"),
    Variable("MS_TOPO_TIMEOUT", "int", "output", _SH, "recovery: MSRUN_CLUSTER_TIME_OUT"),
    Variable("TORCHELASTIC_RESTART_COUNT", "int", "output", _SH, "with MA_MAX_RESTARTS > 0: the attempt"),
    Variable("TORCHELASTIC_MAX_RESTARTS", "int", "output", _SH, "with MA_MAX_RESTARTS > 0: MA_MAX_RESTARTS"),
    Variable("MALAUNCH_ATTEMPT", "int", "output", _SH, "with MA_MAX_RESTARTS > 0: the attempt (torchrun too)"),
    Variable("MALAUNCH_TORCHRUN_RESTART_COUNT", "int", "output", _SH,
             "torchrun, MA_MAX_RESTARTS > 0: torchrun's own count (0)"),
    Variable("MALAUNCH_SHIM_TOKEN", "text", "output", _SH, "every process: finds the job's descendants"),
    Variable("MALAUNCH_RESUME_FROM", "path", "output", _SH, "with MALAUNCH_CHECKPOINT_DIR: the newest complete "
             "checkpoint's folder, once there is one"),
    Variable("MALAUNCH_PROGRESS_FILE", "path", "output", _SH, "with MALAUNCH_HANG_TIMEOUT: a file under the "
             "attempt's log folder; touching it counts as output"),
    Variable("MALAUNCH_PROGRESS_DIR", "path", "output", _SH, "every process: the host's folder of the ranks' "
             "progress records (<log dir>/progress.d)"),
)

class Name:
    """The names the SDK's backends write, as attributes (``Name.MA_NUM_HOSTS``): they import them rather than
    spell them, so a misspelt name fails mypy and import-time use instead of setting a variable nobody reads.
    Each is a row of the table (tests/entrypoint/contract/test_contract_strict.py)."""

    MALAUNCH_CHECKPOINT_DIR = "MALAUNCH_CHECKPOINT_DIR"
    MALAUNCH_CHECKPOINT_KEEP = "MALAUNCH_CHECKPOINT_KEEP"
    MALAUNCH_COORDINATOR_PORT = "MALAUNCH_COORDINATOR_PORT"
    MALAUNCH_GRACE_PERIOD = "MALAUNCH_GRACE_PERIOD"
    MALAUNCH_HANG_TIMEOUT = "MALAUNCH_HANG_TIMEOUT"
    MALAUNCH_HEARTBEAT_TIMEOUT = "MALAUNCH_HEARTBEAT_TIMEOUT"
    MALAUNCH_HOST_WAIT = "MALAUNCH_HOST_WAIT"
    MALAUNCH_JOB_ID = "MALAUNCH_JOB_ID"
    MALAUNCH_JOB_SECRET = "MALAUNCH_JOB_SECRET"
    MALAUNCH_LOG_DIR = "MALAUNCH_LOG_DIR"
    MALAUNCH_MASTER_PORT = "MALAUNCH_MASTER_PORT"
    MALAUNCH_MIN_HOSTS = "MALAUNCH_MIN_HOSTS"
    MALAUNCH_NOTIFY = "MALAUNCH_NOTIFY"
    MALAUNCH_PREPARE = "MALAUNCH_PREPARE"
    MALAUNCH_PREPARE_TIMEOUT = "MALAUNCH_PREPARE_TIMEOUT"
    MALAUNCH_REPORT_FILE = "MALAUNCH_REPORT_FILE"
    MALAUNCH_RESTART_ON = "MALAUNCH_RESTART_ON"
    MALAUNCH_RESUME_SOURCE = "MALAUNCH_RESUME_SOURCE"
    MA_CURRENT_HOST_IP = "MA_CURRENT_HOST_IP"
    MA_CURRENT_INSTANCE_NAME = "MA_CURRENT_INSTANCE_NAME"
    MA_EXTRA_MSRUN_PARAMS = "MA_EXTRA_MSRUN_PARAMS"
    MA_EXTRA_TORCHRUN_PARAMS = "MA_EXTRA_TORCHRUN_PARAMS"
    MA_JOB_DIR = "MA_JOB_DIR"
    MA_LOG_DIR = "MA_LOG_DIR"
    MA_MAX_RESTARTS = "MA_MAX_RESTARTS"
    MA_MSRUN_MASTER_PORT = "MA_MSRUN_MASTER_PORT"
    MA_NUM_GPUS = "MA_NUM_GPUS"
    MA_NUM_HOSTS = "MA_NUM_HOSTS"
    MA_RUN_METHOD = "MA_RUN_METHOD"
    MA_TASK_NAME = "MA_TASK_NAME"
    MA_TORCHRUN_MASTER_PORT = "MA_TORCHRUN_MASTER_PORT"
    MA_VJ_NAME = "MA_VJ_NAME"
    MSRUN_CLUSTER_TIME_OUT = "MSRUN_CLUSTER_TIME_OUT"
    MS_RANKTABLE_ENABLE = "MS_RANKTABLE_ENABLE"
    RANK_TABLE_FILE = "RANK_TABLE_FILE"
    VC_TASK_INDEX = "VC_TASK_INDEX"
    VC_WORKER_HOSTS = "VC_WORKER_HOSTS"
    VC_WORKER_NUM = "VC_WORKER_NUM"


#: Variable name -> row, in table order. Aliases are not keys: :data:`ALIASES` maps each to its row's name.
VARIABLES: Mapping[str, Variable] = types.MappingProxyType({row.name: row for row in _ROWS})
#: Alias -> the name of the row it belongs to (``MA_TASK_INDEX`` -> ``VC_TASK_INDEX``).
ALIASES: Mapping[str, str] = types.MappingProxyType({alias: row.name for row in _ROWS for alias in row.aliases})


def without_secret(environ: Mapping[str, str]) -> Mapping[str, str]:
    """``environ`` as the shim's children get it (ranks, watchdog, notification commands and webhook program):
    everything but the job's secret (``MALAUNCH_JOB_SECRET``), which is the shims' alone."""
    if Name.MALAUNCH_JOB_SECRET not in environ:
        return environ
    return {name: value for name, value in environ.items() if name != Name.MALAUNCH_JOB_SECRET}
