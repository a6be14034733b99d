"""The job spec: frozen dataclasses whose fields are exactly the keys of a job file.

A :class:`JobSpec` validates itself on construction (``__post_init__``), so a spec built in Python and one
loaded from YAML (:mod:`malaunch.sdk.spec.loader`) obey the same rules and raise the same
:class:`~malaunch.sdk.errors.SpecError`, whose ``field`` is the path of the offending value
(``resources.hosts``, ``inputs[1].name``, ``env.MA_NUM_HOSTS``). Validation is pure: it never looks at the
disk; whether ``code_dir`` and ``boot_file`` exist is checked by the backend when it submits.

Fields, with their YAML keys (``docs/sdk.md`` has the full table):

- ``name``, ``run_method`` (``ranktable`` | ``torchrun`` | ``msrun``), ``code_dir``, ``boot_file`` (relative to
  ``code_dir``), ``args``, ``image``, ``env``, ``inputs``, ``outputs``, ``backend``;
- ``resources``: ``hosts``, ``devices_per_host``, ``flavor``, ``pool``;
- ``launcher``: ``master_port``, ``torchrun_extra_params``, ``msrun_master_port``, ``msrun_extra_params``,
  ``msrun_cluster_time_out``, ``msrun_rank_table``, ``grace_period``, ``max_restarts``, ``restart_on``,
  ``coordinator_port``, ``heartbeat_timeout``, ``host_wait`` (the hosts' coordinator), ``hang_timeout``;
- ``volcano`` (:class:`VolcanoOptions`, read by the Volcano backend only): ``namespace``, ``queue``,
  ``priority_class``, ``service_account``, ``image``, ``code_path``, ``code_volume``, ``device_resource``,
  ``max_retry``, ``on_pod_failure``, ``on_pod_eviction``, ``not_retryable_exit_codes``, ``template``.
- ``modelarts``: ``obs_dir``, ``engine_name``, ``engine_version``, ``ssh``, ``job_retry_num``,
  ``job_unconditional_retry`` (only the ModelArts backend reads them).
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
import re
import types
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from malaunch.entrypoint.public import VARIABLES, int_bounds

from ..backends.registry import BACKEND_NAMES, DEFAULT_BACKEND
from ..errors import SpecError, show_value
from ..redact import MASK, is_secret_name

__all__ = [
    "DEFAULT_RUN_METHOD",
    "MODELARTS_JOB_RETRY_BOUNDS",
    "RESERVED_ENV",
    "RESTART_ON_WORDS",
    "RUN_METHODS",
    "VOLCANO_POD_ACTIONS",
    "DataSpec",
    "JobSpec",
    "LauncherOptions",
    "ModelArtsOptions",
    "Resources",
    "VolcanoOptions",
    "key_text",
]

#: ``run_method`` values; each becomes ``MA_RUN_METHOD`` in the containers (the contract table's choices).
RUN_METHODS: Tuple[str, ...] = VARIABLES["MA_RUN_METHOD"].choices
#: The platform's default when ``MA_RUN_METHOD`` is unset is the rank-table fan-out.
DEFAULT_RUN_METHOD = "ranktable"
#: ``launcher.restart_on`` words; a list of exit codes is the other form.
RESTART_ON_WORDS: Tuple[str, ...] = VARIABLES["MALAUNCH_RESTART_ON"].choices

#: Variables the backend sets from the spec; a job's ``env`` may not set them. Value: the field to use instead
#: (``""``: the backend sets it itself). The rows of the shim's contract table with an ``sdk_field``, and their aliases.
RESERVED_ENV: Mapping[str, str] = types.MappingProxyType(
    {
        name: row.sdk_field
        for row in VARIABLES.values()
        if row.sdk_field is not None
        for name in (row.name, *row.aliases)
    }
)

#: ``launcher.msrun_cluster_time_out``: the shim's bounds of MSRUN_CLUSTER_TIME_OUT (-1: wait forever).
_CLUSTER_TIME_OUT_BOUNDS = int_bounds("MSRUN_CLUSTER_TIME_OUT")
#: The shim's bounds of the variables these fields become (ports, hosts, devices per host, restarts).
_PORT_BOUNDS = int_bounds("MA_TORCHRUN_MASTER_PORT")
_HOSTS_BOUNDS = int_bounds("MA_NUM_HOSTS")
_DEVICES_BOUNDS = int_bounds("MA_NUM_GPUS")
_MAX_RESTARTS_BOUNDS = int_bounds("MA_MAX_RESTARTS")
_COORDINATOR_PORT_BOUNDS = int_bounds("MALAUNCH_COORDINATOR_PORT")


def _seconds_bounds(name: str) -> Tuple[float, float]:
    """The shim's bounds of a seconds variable (both ends are set for the coordinator's)."""
    row = VARIABLES[name]
    if row.minimum is None or row.maximum is None:
        raise TypeError(f"{name} has no bounds in the contract table")
    return float(row.minimum), float(row.maximum)


#: ``launcher.heartbeat_timeout`` / ``launcher.host_wait``: the shim's bounds, in seconds.
_HEARTBEAT_BOUNDS = _seconds_bounds("MALAUNCH_HEARTBEAT_TIMEOUT")
_HOST_WAIT_BOUNDS = _seconds_bounds("MALAUNCH_HOST_WAIT")
#: ``launcher.hang_timeout``: the shim's bounds, in seconds (0: off).
_HANG_BOUNDS = _seconds_bounds("MALAUNCH_HANG_TIMEOUT")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DATA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
_RESOURCE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
#: ``modelarts.job_retry_num``: the platform's bounds of ``fault-tolerance/job-retry-num``.
MODELARTS_JOB_RETRY_BOUNDS = (1, 128)
#: ``volcano.on_pod_failure`` / ``on_pod_eviction`` values: restart the whole job (RestartJob) or abort it.
VOLCANO_POD_ACTIONS = ("restart", "abort")


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]+\Z")


def key_text(key: object) -> str:
    """A mapping key as it appears in a field path: plain keys as is, anything else as its ``repr``."""
    if isinstance(key, str) and _PLAIN_KEY.match(key):
        return key
    return show_value(key)


def _fail(path: str, problem: str, value: object, hint: str = "fix the job file") -> SpecError:
    return SpecError(path, problem, value, hint)


def _check_int(path: str, value: object, minimum: int, maximum: Optional[int] = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, "must be a whole number", value)
    if value < minimum:
        raise _fail(path, f"must be >= {minimum}", value)
    if maximum is not None and value > maximum:
        raise _fail(path, f"must be <= {maximum}", value)


def _check_text(path: str, value: object, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise _fail(path, "must be a string", value)
    if not value.strip():
        raise _fail(path, "must not be empty", value)
    if "\x00" in value:
        raise _fail(path, "must not contain NUL characters", value)


def _check_words(path: str, value: object) -> None:
    if not isinstance(value, tuple):
        raise _fail(path, "must be a list of strings", value)
    for index, word in enumerate(value):
        if not isinstance(word, str) or "\x00" in word:
            raise _fail(f"{path}[{index}]", "must be a string", word)


def _check_port(path: str, value: object) -> None:
    if value is not None:
        _check_int(path, value, *_PORT_BOUNDS)


def _one_of(path: str, value: object, choices: Tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in choices:
        raise _fail(path, f"must be one of {', '.join(choices)}", value)


@dataclass(frozen=True)
class Resources:
    """How many hosts and accelerators per host; ``flavor`` and ``pool`` are for cloud backends."""

    hosts: int = 1
    devices_per_host: int = 1
    flavor: Optional[str] = None
    pool: Optional[str] = None

    def __post_init__(self) -> None:
        _check_resources(self, "resources")

    def to_dict(self) -> Dict[str, Any]:
        """YAML-shaped data."""
        return dataclasses.asdict(self)


def _check_resources(res: Resources, prefix: str) -> None:
    _check_int(f"{prefix}.hosts", res.hosts, *_HOSTS_BOUNDS)
    _check_int(f"{prefix}.devices_per_host", res.devices_per_host, *_DEVICES_BOUNDS)
    _check_text(f"{prefix}.flavor", res.flavor, optional=True)
    _check_text(f"{prefix}.pool", res.pool, optional=True)


@dataclass(frozen=True)
class LauncherOptions:
    """Knobs of the in-container launchers; ``None`` means the platform default (ports: a free port locally)."""

    master_port: Optional[int] = None
    torchrun_extra_params: Tuple[str, ...] = ()
    msrun_master_port: Optional[int] = None
    msrun_extra_params: Tuple[str, ...] = ()
    msrun_cluster_time_out: Optional[int] = None
    msrun_rank_table: bool = False
    grace_period: Optional[float] = None
    max_restarts: int = 0  # group restarts after a failure (MA_MAX_RESTARTS)
    restart_on: Union[str, Tuple[int, ...]] = "retryable"  # retryable | always | never | exit codes
    coordinator_port: Optional[int] = None  # the hosts' coordinator (MALAUNCH_COORDINATOR_PORT)
    heartbeat_timeout: Optional[float] = None  # a host silent this long is lost (MALAUNCH_HEARTBEAT_TIMEOUT)
    host_wait: Optional[float] = None  # how long the others wait for a lost host (MALAUNCH_HOST_WAIT)
    hang_timeout: Optional[float] = None  # ranks silent this long: the attempt is hung (MALAUNCH_HANG_TIMEOUT)

    def __post_init__(self) -> None:
        _check_launcher(self, "launcher")

    def to_dict(self) -> Dict[str, Any]:
        """YAML-shaped data."""
        data = dataclasses.asdict(self)
        data["torchrun_extra_params"] = list(self.torchrun_extra_params)
        data["msrun_extra_params"] = list(self.msrun_extra_params)
        if not isinstance(self.restart_on, str):
            data["restart_on"] = list(self.restart_on)
        return data


def _check_launcher(opts: LauncherOptions, prefix: str) -> None:
    _check_port(f"{prefix}.master_port", opts.master_port)
    _check_port(f"{prefix}.msrun_master_port", opts.msrun_master_port)
    _check_words(f"{prefix}.torchrun_extra_params", opts.torchrun_extra_params)
    _check_words(f"{prefix}.msrun_extra_params", opts.msrun_extra_params)
    if opts.msrun_cluster_time_out is not None:
        _check_int(f"{prefix}.msrun_cluster_time_out", opts.msrun_cluster_time_out, *_CLUSTER_TIME_OUT_BOUNDS)
    if not isinstance(opts.msrun_rank_table, bool):
        raise _fail(f"{prefix}.msrun_rank_table", "must be true or false", opts.msrun_rank_table)
    grace = opts.grace_period
    if grace is not None:
        if isinstance(grace, bool) or not isinstance(grace, (int, float)):
            raise _fail(f"{prefix}.grace_period", "must be a number of seconds", grace)
        if not math.isfinite(grace) or grace < 0:
            raise _fail(f"{prefix}.grace_period", "must be a finite number of seconds >= 0", grace)
    _check_int(f"{prefix}.max_restarts", opts.max_restarts, *_MAX_RESTARTS_BOUNDS)
    _check_restart_on(f"{prefix}.restart_on", opts.restart_on)
    if opts.coordinator_port is not None:
        _check_int(f"{prefix}.coordinator_port", opts.coordinator_port, *_COORDINATOR_PORT_BOUNDS)
    _check_seconds(f"{prefix}.heartbeat_timeout", opts.heartbeat_timeout, _HEARTBEAT_BOUNDS)
    _check_seconds(f"{prefix}.host_wait", opts.host_wait, _HOST_WAIT_BOUNDS)
    _check_seconds(f"{prefix}.hang_timeout", opts.hang_timeout, _HANG_BOUNDS)


def _check_seconds(path: str, value: object, bounds: Tuple[float, float]) -> None:
    """``None`` (the shim's default) or a number of seconds within ``bounds``."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(path, "must be a number of seconds", value)
    low, high = bounds
    if not math.isfinite(value) or not low <= value <= high:
        raise _fail(path, f"must be a number of seconds from {low:g} to {high:g}", value)


def _check_restart_on(path: str, value: object) -> None:
    if isinstance(value, str):
        _one_of(path, value, RESTART_ON_WORDS)
        return
    if not isinstance(value, tuple) or not value:
        raise _fail(path, "must be retryable, always, never or a non-empty list of exit codes", value)
    for index, code in enumerate(value):
        _check_int(f"{path}[{index}]", code, 1, 255)


@dataclass(frozen=True)
class VolcanoOptions:
    """The ``volcano:`` section: where and how the Volcano backend runs the job (``docs/volcano.md``)."""

    namespace: Optional[str] = None  # None: the kubeconfig context's namespace
    queue: str = "default"
    priority_class: Optional[str] = None
    service_account: Optional[str] = None
    image: Optional[str] = None  # None: the top-level ``image``
    code_path: str = "/home/ma-user/code"  # the code folder inside the container
    code_volume: Optional[str] = None  # a PersistentVolumeClaim mounted at code_path; None: code is in the image
    device_resource: Optional[str] = None  # e.g. nvidia.com/gpu, huawei.com/Ascend910; None: CPU only
    max_retry: int = 3
    on_pod_failure: str = "restart"
    on_pod_eviction: str = "restart"
    not_retryable_exit_codes: Tuple[int, ...] = (2,)
    template: Optional[str] = None  # a Volcano Job manifest template; None: the packaged one

    def __post_init__(self) -> None:
        _check_volcano(self, "volcano")

    def to_dict(self) -> Dict[str, Any]:
        """YAML-shaped data."""
        data = dataclasses.asdict(self)
        data["not_retryable_exit_codes"] = list(self.not_retryable_exit_codes)
        return data


def _check_pattern(path: str, value: object, pattern: re.Pattern[str], what: str) -> None:
    if value is not None and (not isinstance(value, str) or not pattern.match(value)):
        raise _fail(path, f"must be {what}", value)


def _check_volcano(opts: VolcanoOptions, prefix: str) -> None:
    label = "a Kubernetes name (lower-case letters, digits, '-')"
    _check_pattern(f"{prefix}.namespace", opts.namespace, _DNS_LABEL, label)
    _check_text(f"{prefix}.queue", opts.queue)
    for key in ("priority_class", "service_account", "code_volume"):
        _check_pattern(f"{prefix}.{key}", getattr(opts, key), _DNS_NAME, label)
    _check_text(f"{prefix}.image", opts.image, optional=True)
    _check_text(f"{prefix}.code_path", opts.code_path)
    if not opts.code_path.startswith("/"):
        raise _fail(f"{prefix}.code_path", "must be an absolute path inside the container", opts.code_path)
    resource = "a resource name like nvidia.com/gpu"
    _check_pattern(f"{prefix}.device_resource", opts.device_resource, _RESOURCE_NAME, resource)
    _check_int(f"{prefix}.max_retry", opts.max_retry, 0, 1000)
    _one_of(f"{prefix}.on_pod_failure", opts.on_pod_failure, VOLCANO_POD_ACTIONS)
    _one_of(f"{prefix}.on_pod_eviction", opts.on_pod_eviction, VOLCANO_POD_ACTIONS)
    codes = opts.not_retryable_exit_codes
    if not isinstance(codes, tuple):
        raise _fail(f"{prefix}.not_retryable_exit_codes", "must be a list of exit codes", codes)
    for index, code in enumerate(codes):
        _check_int(f"{prefix}.not_retryable_exit_codes[{index}]", code, 1, 255)
        if code in codes[:index]:
            raise _fail(f"{prefix}.not_retryable_exit_codes[{index}]", "is listed twice", code, "keep one")
    _check_text(f"{prefix}.template", opts.template, optional=True)


@dataclass(frozen=True)
class DataSpec:
    """One input or output channel: ``name`` becomes the boot file argument ``--<name>=<local path>``.

    ``path`` is a local path (or, for cloud backends, an ``obs://`` URL). An output without ``path`` gets a
    folder in the job directory.
    """

    name: str
    path: Optional[str] = None

    def __post_init__(self) -> None:
        _check_data(self, "data")

    def to_dict(self) -> Dict[str, Any]:
        """YAML-shaped data."""
        return dataclasses.asdict(self)


def _check_data(data: DataSpec, prefix: str) -> None:
    if not isinstance(data.name, str) or not _DATA_NAME.match(data.name):
        raise _fail(f"{prefix}.name", "must be an identifier (letters, digits, _; e.g. data_url)", data.name)
    _check_text(f"{prefix}.path", data.path, optional=True)


_OBS_DIR = re.compile(r"obs://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?\Z")


@dataclass(frozen=True)
class ModelArtsOptions:
    """What only the ModelArts backend needs: ``obs_dir`` (``obs://bucket/prefix/``) receives code and logs;
    ``engine_name`` + ``engine_version`` pick a preset engine when the job has no ``image``."""

    obs_dir: Optional[str] = None
    engine_name: Optional[str] = None
    engine_version: Optional[str] = None
    # The job file's ``ssh: {key_pair_names: [...]}``: the job gets the platform's SSH endpoint (ma-submit exec).
    ssh_key_pair_names: Tuple[str, ...] = ()
    # The platform's own job restarts (the level above malaunch's, docs/recovery.md#escalation): as many as
    # ``job_retry_num`` (1-128) after a fault; ``job_unconditional_retry``: whatever the cause.
    job_retry_num: Optional[int] = None
    job_unconditional_retry: bool = False

    def __post_init__(self) -> None:
        _check_modelarts(self, "modelarts")

    def to_dict(self) -> Dict[str, Any]:
        """YAML-shaped data."""
        data = dataclasses.asdict(self)
        names = data.pop("ssh_key_pair_names")
        if names:
            data["ssh"] = {"key_pair_names": list(names)}
        return data


def _check_modelarts(opts: ModelArtsOptions, prefix: str) -> None:
    _check_text(f"{prefix}.obs_dir", opts.obs_dir, optional=True)
    if opts.obs_dir is not None and not _OBS_DIR.match(opts.obs_dir):
        raise _fail(f"{prefix}.obs_dir", "must be an OBS folder URL like obs://bucket/prefix/", opts.obs_dir)
    _check_text(f"{prefix}.engine_name", opts.engine_name, optional=True)
    _check_text(f"{prefix}.engine_version", opts.engine_version, optional=True)
    for position, name in enumerate(opts.ssh_key_pair_names):
        _check_text(f"{prefix}.ssh.key_pair_names[{position}]", name, optional=False)
    if opts.job_retry_num is not None:
        _check_int(f"{prefix}.job_retry_num", opts.job_retry_num, *MODELARTS_JOB_RETRY_BOUNDS)
    if not isinstance(opts.job_unconditional_retry, bool):
        raise _fail(f"{prefix}.job_unconditional_retry", "must be true or false", opts.job_unconditional_retry)
    if opts.job_unconditional_retry and opts.job_retry_num is None:
        raise _fail(f"{prefix}.job_unconditional_retry", "needs modelarts.job_retry_num (how many restarts)",
                    opts.job_unconditional_retry, "set job_retry_num too, e.g. job_retry_num: 3")  # fmt: skip
    if (opts.engine_name is None) != (opts.engine_version is None):
        given = "engine_name" if opts.engine_name is not None else "engine_version"
        raise _fail(f"{prefix}.{given}", "needs both engine_name and engine_version", getattr(opts, given))


@dataclass(frozen=True)
class JobSpec:
    """A whole job. Construct it directly, with :func:`malaunch.sdk.spec.loader.spec_from_mapping` or from YAML."""

    name: str
    code_dir: str
    boot_file: str
    run_method: str = DEFAULT_RUN_METHOD
    args: Tuple[str, ...] = ()
    image: Optional[str] = None
    resources: Resources = field(default_factory=Resources)
    env: Mapping[str, str] = field(default_factory=lambda: types.MappingProxyType({}))
    inputs: Tuple[DataSpec, ...] = ()
    outputs: Tuple[DataSpec, ...] = ()
    backend: str = DEFAULT_BACKEND
    launcher: LauncherOptions = field(default_factory=LauncherOptions)
    volcano: VolcanoOptions = field(default_factory=VolcanoOptions)
    modelarts: Optional[ModelArtsOptions] = None
    keep_for: Optional[float] = None  # seconds an ended job is kept (None: until pruned)

    def __post_init__(self) -> None:
        if isinstance(self.env, Mapping) and not isinstance(self.env, types.MappingProxyType):
            object.__setattr__(self, "env", types.MappingProxyType(dict(self.env)))
        _check_spec(self)

    def replace(self, **changes: Any) -> JobSpec:
        """A copy with ``changes`` applied, validated again."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> Dict[str, Any]:
        """YAML/JSON-shaped data with every field (the inverse of ``spec_from_mapping``); ``keep_for`` only when
        set, so a job file without it reads the same as before the field existed."""
        data: Dict[str, Any] = {
            "name": self.name,
            "run_method": self.run_method,
            "code_dir": self.code_dir,
            "boot_file": self.boot_file,
            "args": list(self.args),
            "image": self.image,
            "resources": self.resources.to_dict(),
            "env": dict(sorted(self.env.items())),
            "inputs": [item.to_dict() for item in self.inputs],
            "outputs": [item.to_dict() for item in self.outputs],
            "backend": self.backend,
            "launcher": self.launcher.to_dict(),
            "volcano": self.volcano.to_dict(),
            "modelarts": None if self.modelarts is None else self.modelarts.to_dict(),
        }
        if self.keep_for is not None:
            data["keep_for"] = self.keep_for
        return data


def _check_spec(spec: JobSpec) -> None:
    if not isinstance(spec.name, str) or not _NAME.match(spec.name):
        raise _fail("name", "must be 1-64 letters, digits, '-' or '_', starting with a letter or digit", spec.name)
    _one_of("run_method", spec.run_method, RUN_METHODS)
    _check_text("code_dir", spec.code_dir)
    _check_boot_file(spec.boot_file)
    _check_words("args", spec.args)
    _check_text("image", spec.image, optional=True)
    if not isinstance(spec.resources, Resources):
        raise _fail("resources", "must be a mapping with hosts, devices_per_host, flavor, pool", spec.resources)
    _check_resources(spec.resources, "resources")
    _check_env(spec.env)
    seen: Dict[str, str] = {}
    for kind, items in (("inputs", spec.inputs), ("outputs", spec.outputs)):
        if not isinstance(items, tuple):
            raise _fail(kind, "must be a list of {name, path} mappings", items)
        for index, item in enumerate(items):
            where = f"{kind}[{index}]"
            if not isinstance(item, DataSpec):
                raise _fail(where, "must be a mapping with name and path", item)
            _check_data(item, where)
            if item.name in seen:
                raise _fail(f"{where}.name", f"is already used by {seen[item.name]}", item.name)
            seen[item.name] = where
            if kind == "inputs" and item.path is None:
                raise _fail(f"{where}.path", "is required for an input", item.path)
    _one_of("backend", spec.backend, BACKEND_NAMES)
    if not isinstance(spec.launcher, LauncherOptions):
        raise _fail("launcher", "must be a mapping of launcher options", spec.launcher)
    _check_launcher(spec.launcher, "launcher")
    if not isinstance(spec.volcano, VolcanoOptions):
        raise _fail("volcano", "must be a mapping of Volcano options", spec.volcano)
    _check_volcano(spec.volcano, "volcano")
    if spec.modelarts is not None:
        if not isinstance(spec.modelarts, ModelArtsOptions):
            raise _fail("modelarts", "must be a mapping with obs_dir, engine_name, engine_version", spec.modelarts)
        _check_modelarts(spec.modelarts, "modelarts")
    keep = spec.keep_for
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, (int, float)) or not math.isfinite(keep)
                             or keep < 0):  # fmt: skip
        raise _fail("keep_for", "must be a duration >= 0 (seconds, or 90s, 30m, 12h, 7d, 2w)", keep)


def _check_boot_file(boot_file: object) -> None:
    _check_text("boot_file", boot_file)
    if not isinstance(boot_file, str):  # for the type checker; _check_text raised already
        raise _fail("boot_file", "must be a string", boot_file)
    normal = posixpath.normpath(boot_file.replace("\\", "/"))
    if boot_file.startswith("/") or normal == ".." or normal.startswith("../") or normal == ".":
        raise _fail("boot_file", "must be a file path relative to code_dir, inside it", boot_file)


def _check_env(env: object) -> None:
    if not isinstance(env, Mapping):
        raise _fail("env", "must be a mapping of NAME: value", env)
    for key, value in env.items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise _fail(f"env.{key_text(key)}", "is not a valid variable name (letters, digits, _)", key)
        if key in RESERVED_ENV:
            instead = RESERVED_ENV[key]
            hint = f"set {instead} instead" if instead else "remove it"
            shown = MASK if is_secret_name(key) else value
            raise _fail(f"env.{key}", "is set by the backend, not by env", shown, hint)
        if not isinstance(value, str) or "\x00" in value:
            raise _fail(f"env.{key}", "must be a string", MASK if is_secret_name(key) else value)
