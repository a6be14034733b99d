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
  ``coordinator_port``, ``heartbeat_timeout``, ``host_wait`` (the hosts' coordinator), ``hang_timeout``,
  ``min_hosts`` (elastic torchrun: the job goes on with fewer hosts, down to this many), ``prepare`` (commands,
  each an argv, every host runs before its first attempt) and ``prepare_timeout``;
- ``notify`` (targets told of the job's events, :mod:`malaunch.sdk.notify`) and ``notify_timeout``;
- ``priority`` (the local queue: a higher one goes ahead of jobs submitted earlier);
- one section per backend that declares one, named as the backend (``volcano``, ``modelarts``): its dataclass,
  its checks and how the job file's mapping becomes it live in the backend's ``options.py``; the spec only holds
  it and asks the registry (:func:`malaunch.sdk.backends.option_sections`) which sections there are;
- ``checkpoint``: ``keep`` (complete checkpoints kept, default 2), ``volume`` (Volcano: the PersistentVolumeClaim
  that holds it), ``obs_path`` (ModelArts: the OBS folder it is uploaded to). The section's presence gives every
  rank ``MALAUNCH_CHECKPOINT_DIR``, a folder the backend chooses to survive its restarts (docs/recovery.md);
- ``resume_from`` (``JOB_ID`` or ``JOB_ID:NAME``, :mod:`.resume`): start from an ended job's checkpoint (needs
  ``checkpoint``).
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
import re
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Tuple, Union

from malaunch.entrypoint.public import VARIABLES, int_bounds, seconds_bounds

from ..backends.registry import BACKEND_NAMES, DEFAULT_BACKEND, new_section, option_sections
from ..errors import show_value
from ..notify.targets import NotifyTarget, check_notify_timeout, check_targets
from ..redact import MASK, is_secret_name
from .checks import check_int as _check_int
from .checks import check_text as _check_text
from .checks import check_words as _check_words
from .checks import fail as _fail
from .checks import one_of as _one_of
from .resume import parse_resume

if TYPE_CHECKING:
    from ..backends import ModelArtsOptions, VolcanoOptions

__all__ = [
    "DEFAULT_CHECKPOINT_KEEP",
    "DEFAULT_RUN_METHOD",
    "ELASTIC_RUN_METHODS",
    "RESERVED_ENV",
    "RESTART_ON_WORDS",
    "RUN_METHODS",
    "CheckpointOptions",
    "DataSpec",
    "JobSpec",
    "LauncherOptions",
    "Resources",
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
_MIN_HOSTS_BOUNDS = int_bounds("MALAUNCH_MIN_HOSTS")
#: ``launcher.min_hosts``: the one run method whose launcher re-forms its group at another size.
ELASTIC_RUN_METHODS = ("torchrun",)


#: ``launcher.heartbeat_timeout`` / ``launcher.host_wait``: the shim's bounds, in seconds.
_HEARTBEAT_BOUNDS = seconds_bounds("MALAUNCH_HEARTBEAT_TIMEOUT")
_HOST_WAIT_BOUNDS = seconds_bounds("MALAUNCH_HOST_WAIT")
#: ``launcher.hang_timeout``: the shim's bounds, in seconds (0: off).
_HANG_BOUNDS = seconds_bounds("MALAUNCH_HANG_TIMEOUT")
#: ``launcher.prepare_timeout``: the shim's bounds, in seconds; ``launcher.prepare``: at most this many steps.
_PREPARE_TIMEOUT_BOUNDS = seconds_bounds("MALAUNCH_PREPARE_TIMEOUT")
_PREPARE_MAX = 100
_PREPARE_HINT = 'give a list of commands, each a list of words: [["python", "fetch.py"], ["tar", "xf", "d.tar"]]'
#: ``checkpoint.keep``: the shim's bounds and default of MALAUNCH_CHECKPOINT_KEEP.
_KEEP_BOUNDS = int_bounds("MALAUNCH_CHECKPOINT_KEEP")
DEFAULT_CHECKPOINT_KEEP = int(VARIABLES["MALAUNCH_CHECKPOINT_KEEP"].default or 2)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DATA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
#: ``checkpoint.volume``: a PersistentVolumeClaim's name (a DNS subdomain, as Kubernetes names it).
_CLAIM_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
#: ``checkpoint.obs_path``: an OBS folder URL (the bucket's naming rules, then any prefix).
_OBS_FOLDER = re.compile(r"obs://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?\Z")


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]+\Z")


def key_text(key: object) -> str:
    """A mapping key as it appears in a field path: plain keys as is, anything else as its ``repr``."""
    if isinstance(key, str) and _PLAIN_KEY.match(key):
        return key
    return show_value(key)


def _check_port(path: str, value: object) -> None:
    if value is not None:
        _check_int(path, value, *_PORT_BOUNDS)


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
    min_hosts: Optional[int] = None  # elastic torchrun: go on with at least this many hosts (MALAUNCH_MIN_HOSTS)
    prepare: Tuple[Tuple[str, ...], ...] = ()  # commands every host runs before attempt 0 (MALAUNCH_PREPARE)
    prepare_timeout: Optional[float] = None  # seconds a host's prepare steps may take (MALAUNCH_PREPARE_TIMEOUT)

    def __post_init__(self) -> None:
        _check_launcher(self, "launcher")

    def to_dict(self) -> Dict[str, Any]:
        """YAML-shaped data."""
        data = dataclasses.asdict(self)
        data["torchrun_extra_params"] = list(self.torchrun_extra_params)
        data["msrun_extra_params"] = list(self.msrun_extra_params)
        if not isinstance(self.restart_on, str):
            data["restart_on"] = list(self.restart_on)
        if self.min_hosts is None:  # not elastic: the data (and every dry run showing it) is as before the field
            del data["min_hosts"]
        if self.prepare:
            data["prepare"] = [list(step) for step in self.prepare]
        else:  # no prepare steps: as before the fields
            del data["prepare"]
        if self.prepare_timeout is None:
            del data["prepare_timeout"]
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
    if opts.min_hosts is not None:
        _check_int(f"{prefix}.min_hosts", opts.min_hosts, *_MIN_HOSTS_BOUNDS)
    _check_prepare(f"{prefix}.prepare", opts.prepare)
    _check_seconds(f"{prefix}.prepare_timeout", opts.prepare_timeout, _PREPARE_TIMEOUT_BOUNDS)


def _check_prepare(path: str, value: object) -> None:
    """A list of commands, each a non-empty list of words (an argv): never a shell string."""
    if isinstance(value, str):
        raise _fail(path, f"must be a list of commands, not a shell string; {_PREPARE_HINT}", value)
    if not isinstance(value, tuple):
        raise _fail(path, f"must be a list of commands; {_PREPARE_HINT}", value)
    if len(value) > _PREPARE_MAX:
        raise _fail(path, f"must hold at most {_PREPARE_MAX} commands", len(value))
    for index, step in enumerate(value):
        if isinstance(step, str):
            raise _fail(f"{path}[{index}]", f"is a shell string, not a list of words; {_PREPARE_HINT}", step)
        if not isinstance(step, tuple) or not step or not all(isinstance(word, str) for word in step):
            raise _fail(f"{path}[{index}]", f"must be a non-empty list of words; {_PREPARE_HINT}", step)
        if not step[0] or any("\0" in word for word in step):
            raise _fail(f"{path}[{index}]", "must name a program first and hold no NUL character", step)


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


@dataclass(frozen=True)
class CheckpointOptions:
    """The ``checkpoint:`` section: every rank gets ``MALAUNCH_CHECKPOINT_DIR``; ``keep`` complete ones stay."""

    keep: int = DEFAULT_CHECKPOINT_KEEP  # MALAUNCH_CHECKPOINT_KEEP
    volume: Optional[str] = None  # Volcano: the PersistentVolumeClaim mounted on every pod (required there)
    obs_path: Optional[str] = None  # ModelArts: the OBS folder of the output channel (None: under modelarts.obs_dir)

    def __post_init__(self) -> None:
        _check_int("checkpoint.keep", self.keep, *_KEEP_BOUNDS)
        if self.volume is not None and (not isinstance(self.volume, str) or not _CLAIM_NAME.match(self.volume)):
            raise _fail("checkpoint.volume", "must be the name of a PersistentVolumeClaim (lower-case letters, "
                        "digits, '-' and '.')", self.volume)  # fmt: skip
        if self.obs_path is not None and (not isinstance(self.obs_path, str) or not _OBS_FOLDER.match(self.obs_path)):
            raise _fail("checkpoint.obs_path", "must be an OBS folder URL like obs://bucket/prefix/", self.obs_path)

    def to_dict(self) -> Dict[str, Any]:
        """YAML-shaped data."""
        return dataclasses.asdict(self)


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
    # The backends' own sections (fields named as the backend), each declared in ``<backend>/options.py``.
    volcano: VolcanoOptions = field(default_factory=lambda: new_section("volcano"))
    modelarts: Optional[ModelArtsOptions] = None
    keep_for: Optional[float] = None  # seconds an ended job is kept (None: until pruned)
    notify: Tuple[NotifyTarget, ...] = ()  # who is told of the job's events (malaunch.sdk.notify)
    notify_timeout: Optional[float] = None  # seconds each event's delivery may take in all (None: 10)
    priority: int = 0  # the local queue: a higher one starts before the jobs submitted earlier
    checkpoint: Optional[CheckpointOptions] = None  # None: no checkpoint folder
    resume_from: Optional[str] = None  # another job's checkpoint, JOB_ID or JOB_ID:NAME (MALAUNCH_RESUME_SOURCE)

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
            **{name: _section_data(getattr(self, name)) for name in _SECTION_FIELDS},
        }
        if self.keep_for is not None:
            data["keep_for"] = self.keep_for
        if self.notify:  # only when set: a job file without it reads (and dry-runs) as before the field
            data["notify"] = [target.to_dict() for target in self.notify]
        if self.notify_timeout is not None:
            data["notify_timeout"] = self.notify_timeout
        if self.priority:
            data["priority"] = self.priority
        if self.checkpoint is not None:
            data["checkpoint"] = self.checkpoint.to_dict()
        if self.resume_from is not None:
            data["resume_from"] = self.resume_from
        return data


#: The fields that hold a backend's own section, in the order of ``JobSpec``'s fields.
_SECTION_FIELDS = tuple(item.name for item in dataclasses.fields(JobSpec) if item.name in BACKEND_NAMES)


def _section_data(section: Any) -> Optional[Dict[str, Any]]:
    data: Optional[Dict[str, Any]] = None if section is None else section.to_dict()
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
    _check_elastic(spec)
    _check_sections(spec)
    keep = spec.keep_for
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, (int, float)) or not math.isfinite(keep)
                             or keep < 0):  # fmt: skip
        raise _fail("keep_for", "must be a duration >= 0 (seconds, or 90s, 30m, 12h, 7d, 2w)", keep)
    check_targets(spec.notify)
    check_notify_timeout(spec.notify_timeout)
    _check_int("priority", spec.priority, -1000, 1000)
    if spec.checkpoint is not None and not isinstance(spec.checkpoint, CheckpointOptions):
        raise _fail("checkpoint", "must be a mapping with keep, volume, obs_path", spec.checkpoint)
    if spec.resume_from is not None:
        parse_resume(spec.resume_from)
        if spec.checkpoint is None:
            raise _fail("resume_from", "needs a checkpoint: section (the new job's own checkpoint folder)",
                        spec.resume_from, "add 'checkpoint: {}' to the job file (checkpoint={} in Job(...))")


def _check_sections(spec: JobSpec) -> None:
    """Each backend's section is its dataclass (which checked its values when made), or None when optional."""
    for section in option_sections():
        value = getattr(spec, section.name)
        if value is None and section.optional:
            continue
        if not isinstance(value, section.options):
            raise _fail(section.name, f"must be {section.shape}", value)


def _check_elastic(spec: JobSpec) -> None:
    """``launcher.min_hosts``: at most ``resources.hosts``, and only for a method whose group can change size."""
    wanted = spec.launcher.min_hosts
    if wanted is None:
        return
    if spec.run_method not in ELASTIC_RUN_METHODS:
        raise _fail("launcher.min_hosts", f"needs run_method torchrun (only torchrun re-forms its group with fewer "
                    f"hosts; {spec.run_method} starts all of them or none)", wanted,
                    "remove launcher.min_hosts, or set run_method: torchrun")  # fmt: skip
    if wanted > spec.resources.hosts:
        raise _fail("launcher.min_hosts", f"must be at most resources.hosts ({spec.resources.hosts})", wanted,
                    f"set min_hosts from 1 to {spec.resources.hosts}")  # fmt: skip


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
