"""The shim's configuration: the environment read once, into one frozen object the rest of the shim receives.

:func:`parse_shim_config` is a pure function of a ``Mapping``: ``main`` calls it once with ``os.environ`` (its
options laid over) and hands the result on; no other module of the shim reads the environment or parses a
variable (``tests/entrypoint/contract/test_config.py`` checks it). What each part holds:

- ``cluster``: the platform's facts (:class:`~.cluster_env.ClusterEnv`: hosts, devices, method, ports, folders);
- ``policy``: the restart policy (``MA_MAX_RESTARTS``, ``MALAUNCH_RESTART_ON``, ``MALAUNCH_RESTART_BACKOFF``);
- ``hang_timeout``: ``MALAUNCH_HANG_TIMEOUT`` (0: off);
- ``recovery``: MindSpore recovery (``MS_ENABLE_RECOVERY``, read with msrun only; ``MALAUNCH_MS_RECOVERY_DELAY``,
  checked whatever the method; ``MS_RECOVERY_PATH``);
- ``coordinator``: a multi-host job's coordinator settings (``MALAUNCH_COORDINATOR``, ``..._PORT``,
  ``MALAUNCH_HEARTBEAT_TIMEOUT``, ``MALAUNCH_HOST_WAIT``, ``MALAUNCH_JOB_SECRET``); None on one host, where they
  are not read;
- ``path``: the inherited ``PATH`` (the ranks' ``PATH`` under msrun starts with it);
- ``checkpoints``: the checkpoint folder, how many complete checkpoints to keep and another job's checkpoint to
  start from (``MALAUNCH_CHECKPOINT_DIR``, ``MALAUNCH_CHECKPOINT_KEEP``, ``MALAUNCH_RESUME_SOURCE``); None without
  the folder (a source without one exits 2);
- ``prepare``: the commands every host runs before its first attempt and their time (``MALAUNCH_PREPARE``,
  ``MALAUNCH_PREPARE_TIMEOUT``, :mod:`.prepare_steps`); None without any.

``MALAUNCH_MIN_HOSTS`` (read with the cluster) is refused with any method but torchrun, and with the
coordinator turned off.

Variables are read in the order a bad value was always reported in: the cluster first, then the restart
policy, the recovery delay, the hang timeout, MindSpore recovery, the coordinator. The ranks' environment is not
part of this: it is the mapping itself, passed on as data (without the job's secret).

Slotted classes, not dataclasses or named tuples: they are built before the first rank starts.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, NamedTuple, Optional, Tuple, Union

from . import VARIABLES, parse_bool, parse_codes, parse_int, parse_seconds, raw_value
from .cluster_env import ClusterEnv, parse_cluster_env
from .errors import ConfigError
from .prepare_steps import PrepareSteps, parse_prepare

__all__ = [
    "DEFAULT_BACKOFF",
    "DEFAULT_RECOVERY_DELAY",
    "Checkpoints",
    "CoordinatorSettings",
    "MsRecovery",
    "RestartPolicy",
    "ShimConfig",
    "parse_coordinator",
    "parse_restart_policy",
    "parse_shim_config",
]

DEFAULT_BACKOFF = float(VARIABLES["MALAUNCH_RESTART_BACKOFF"].default or 0.0)
DEFAULT_RECOVERY_DELAY = float(VARIABLES["MALAUNCH_MS_RECOVERY_DELAY"].default or 0.0)
_MSRUN = "msrun"  # MindSpore recovery is read with msrun only
_TORCHRUN = "torchrun"  # elastic hosts (MALAUNCH_MIN_HOSTS) are torchrun's only


class RestartPolicy(NamedTuple):
    """How often and on what the group is started again. ``restart_on``: a choice word or exit codes."""

    max_restarts: int = 0
    restart_on: Union[str, Tuple[int, ...]] = "retryable"
    backoff: float = DEFAULT_BACKOFF

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready form."""
        on = self.restart_on if isinstance(self.restart_on, str) else list(self.restart_on)
        return {"max_restarts": self.max_restarts, "restart_on": on, "backoff": self.backoff}


class _Frozen:
    """Fields set once in ``__init__``; assigning one later raises, as a frozen dataclass does."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot set {name!r}")

    def _set(self, **fields: object) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def _fields(self) -> Tuple[object, ...]:
        names: Tuple[str, ...] = self.__slots__
        return tuple(getattr(self, name) for name in names)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and isinstance(other, _Frozen) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())


class MsRecovery(_Frozen):
    """MindSpore recovery: wanted (msrun with ``MS_ENABLE_RECOVERY`` true), the relaunch delay, the files' path."""

    __slots__ = ("delay", "enabled", "path")

    enabled: bool
    delay: float
    path: Optional[str]  # MS_RECOVERY_PATH; None: <log dir>/ms_recovery

    def __init__(self, enabled: bool, delay: float, path: Optional[str]) -> None:
        self._set(enabled=enabled, delay=delay, path=path)

    def __repr__(self) -> str:
        return f"MsRecovery(enabled={self.enabled}, delay={self.delay}, path={self.path!r})"


class CoordinatorSettings(_Frozen):
    """A multi-host job's coordinator settings (the secret is never shown)."""

    __slots__ = ("heartbeat_timeout", "host_wait", "port", "secret", "wanted")

    wanted: bool  # MALAUNCH_COORDINATOR
    port: int
    heartbeat_timeout: float
    host_wait: float
    secret: Optional[str]  # MALAUNCH_JOB_SECRET; None: not given

    def __init__(self, wanted: bool, port: int, heartbeat_timeout: float, host_wait: float,
                 secret: Optional[str]) -> None:  # fmt: skip
        self._set(wanted=wanted, port=port, heartbeat_timeout=heartbeat_timeout, host_wait=host_wait, secret=secret)

    def __repr__(self) -> str:  # never the secret
        return (f"CoordinatorSettings(wanted={self.wanted}, port={self.port}, "
                f"heartbeat_timeout={self.heartbeat_timeout}, host_wait={self.host_wait}, "
                f"secret_given={self.secret is not None})")  # fmt: skip


class Checkpoints(_Frozen):
    """The checkpoint folder (``MALAUNCH_CHECKPOINT_DIR``), the complete checkpoints kept in it, and another job's
    checkpoint to start from until the folder holds one of its own (``MALAUNCH_RESUME_SOURCE``; None: none)."""

    __slots__ = ("directory", "keep", "source")

    directory: str
    keep: int  # MALAUNCH_CHECKPOINT_KEEP
    source: Optional[str]  # MALAUNCH_RESUME_SOURCE

    def __init__(self, directory: str, keep: int, source: Optional[str] = None) -> None:
        self._set(directory=directory, keep=keep, source=source)

    def __repr__(self) -> str:
        return f"Checkpoints(directory={self.directory!r}, keep={self.keep}, source={self.source!r})"


class ShimConfig(_Frozen):
    """Everything the shim takes from its environment, validated. Frozen."""

    __slots__ = ("checkpoints", "cluster", "coordinator", "hang_timeout", "path", "policy", "prepare", "recovery")

    cluster: ClusterEnv
    policy: RestartPolicy
    hang_timeout: float
    recovery: MsRecovery
    coordinator: Optional[CoordinatorSettings]
    path: str
    checkpoints: Optional[Checkpoints]
    prepare: Optional[PrepareSteps]

    def __init__(self, cluster: ClusterEnv, policy: RestartPolicy, hang_timeout: float, recovery: MsRecovery,
                 coordinator: Optional[CoordinatorSettings], path: str, checkpoints: Optional[Checkpoints] = None,
                 prepare: Optional[PrepareSteps] = None) -> None:  # fmt: skip
        self._set(cluster=cluster, policy=policy, hang_timeout=hang_timeout, recovery=recovery,
                  coordinator=coordinator, path=path, checkpoints=checkpoints, prepare=prepare)  # fmt: skip

    def __repr__(self) -> str:
        return (f"ShimConfig(method={self.cluster.method!r}, hosts={self.cluster.num_hosts}, policy={self.policy}, "
                f"hang_timeout={self.hang_timeout}, recovery={self.recovery!r}, coordinator={self.coordinator!r})")


def parse_restart_policy(environ: Mapping[str, str]) -> RestartPolicy:
    """The restart policy from the environment. Pure.

    Raises:
        ConfigError: a variable has an invalid value.
    """
    max_restarts = parse_int(environ, "MA_MAX_RESTARTS")  # the contract's rules: ASCII digits, 0-1000
    restart_on = parse_codes(environ, "MALAUNCH_RESTART_ON")
    return RestartPolicy(max_restarts, restart_on, parse_seconds(environ, "MALAUNCH_RESTART_BACKOFF"))


def parse_coordinator(environ: Mapping[str, str]) -> CoordinatorSettings:
    """The coordinator settings of a multi-host job. Pure.

    Raises:
        ConfigError: a coordinator variable has an invalid value.
    """
    return CoordinatorSettings(
        parse_bool(environ, "MALAUNCH_COORDINATOR"),
        parse_int(environ, "MALAUNCH_COORDINATOR_PORT"),
        parse_seconds(environ, "MALAUNCH_HEARTBEAT_TIMEOUT"),
        parse_seconds(environ, "MALAUNCH_HOST_WAIT"),
        raw_value(environ, "MALAUNCH_JOB_SECRET"),
    )


def parse_shim_config(environ: Mapping[str, str]) -> ShimConfig:
    """Validate every variable the shim reads and return them as one :class:`ShimConfig`. Pure.

    Raises:
        ConfigError: the first invalid variable, with its value and what is expected.
    """
    cluster = parse_cluster_env(environ)
    policy = parse_restart_policy(environ)
    delay = parse_seconds(environ, "MALAUNCH_MS_RECOVERY_DELAY")  # refused when invalid, whatever the method
    hang_timeout = parse_seconds(environ, "MALAUNCH_HANG_TIMEOUT")
    enabled = cluster.method == _MSRUN and parse_bool(environ, "MS_ENABLE_RECOVERY")
    recovery = MsRecovery(enabled, delay, raw_value(environ, "MS_RECOVERY_PATH"))
    coordinator = parse_coordinator(environ) if cluster.num_hosts > 1 else None
    if cluster.min_hosts is not None and cluster.method != _TORCHRUN:
        shown = cluster.method or "unset (the rank-table fan-out)"
        raise ConfigError("MALAUNCH_MIN_HOSTS", str(cluster.min_hosts), f"elastic hosts work with "
                          f"MA_RUN_METHOD=torchrun only, not {shown}: unset MALAUNCH_MIN_HOSTS (launcher.min_hosts) "
                          "or run with torchrun")  # fmt: skip
    if coordinator is not None and not coordinator.wanted and cluster.min_hosts is not None:
        raise ConfigError("MALAUNCH_MIN_HOSTS", str(cluster.min_hosts), "elastic hosts need the hosts' coordinator, "
                          "which MALAUNCH_COORDINATOR=False turns off: unset one of the two")  # fmt: skip
    keep = parse_int(environ, "MALAUNCH_CHECKPOINT_KEEP")  # checked whether or not the folder is given
    folder = raw_value(environ, "MALAUNCH_CHECKPOINT_DIR")
    source = raw_value(environ, "MALAUNCH_RESUME_SOURCE")
    if source and not folder:
        raise ConfigError("MALAUNCH_RESUME_SOURCE", source, "a job resumes from another job's checkpoint only with "
                          "a checkpoint folder of its own: set MALAUNCH_CHECKPOINT_DIR too (the job file's "
                          "checkpoint: section)")  # fmt: skip
    checkpoints = Checkpoints(folder, keep, source or None) if folder else None
    return ShimConfig(cluster, policy, hang_timeout, recovery, coordinator, environ.get("PATH", ""), checkpoints,
                      parse_prepare(environ))
