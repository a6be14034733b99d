"""The job file's ``launcher:`` fields as the platform's variables: one table, used by every backend and the loader.

Every backend hands the shim the same launcher knobs, in the platform's own variable names
(``docs/entrypoint.md``). :data:`LAUNCHER_VARIABLES` is the one table of them, variable -> ``launcher`` field:

- :func:`launcher_env` goes from a spec to the variables (the local backend, the ModelArts create body's
  ``environments`` and the Volcano manifest's container ``env`` all call it);
- :mod:`malaunch.sdk.spec.loader` goes the other way: a job file that sets one of the platform's own variables in
  ``env:`` (as a ModelArts job does) gets it moved into the field (``loader.LAUNCHER_ENV`` is built from the
  rows with ``from_env``). malaunch's restart variables are not the platform's: in ``env:`` they are refused
  (``spec.RESERVED_ENV``) in favour of ``launcher.max_restarts``/``restart_on``.

Rules that hold on every backend:

1. A variable is only set when its field is set (``max_restarts: 0`` and ``msrun_rank_table: false`` set
   nothing); ``restart_on`` is sent only with ``max_restarts``, which it qualifies.
2. ``master_port`` is ``MA_TORCHRUN_MASTER_PORT`` for torchrun and ``MALAUNCH_MASTER_PORT`` for the rank-table
   fan-out; msrun uses ``msrun_master_port`` (``MA_MSRUN_MASTER_PORT``) instead, so ``master_port`` is not sent
   for it. ``MS_RANKTABLE_ENABLE`` is sent for msrun only.
3. A port the job file leaves open: with ``open_port=None`` (ModelArts, Volcano) the variable stays unset and
   the platform (or the shim's default) decides; the local backend passes its ``AUTO`` placeholder, filled with
   a free port at submit time. The ports opened that way are the method's own: ``master_port`` for torchrun and
   ranktable, ``msrun_master_port`` for msrun; ``coordinator_port`` (the hosts' coordinator) for every method.
4. malaunch's own variables (restarts, the hosts' coordinator) are not the platform's: a job file's ``env:``
   may not set them (``from_env=False``); their fields are the way.
"""

from __future__ import annotations

import json
import shlex
import types
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple

from malaunch.entrypoint.public import VARIABLES, Name

from .model import RUN_METHODS, JobSpec, LauncherOptions

__all__ = ["LAUNCHER_VARIABLES", "LauncherVariable", "launcher_env"]


@dataclass(frozen=True)
class LauncherVariable:
    """One row of the table: the platform variable, the ``launcher`` field, and for which run methods it applies.

    ``methods`` empty: every method. ``open_for``: the run methods for which an unset port gets the
    ``open_port`` placeholder (rule 3). ``from_env``: a job file's ``env:`` may set it instead of the field.
    """

    name: str
    field: str
    methods: Tuple[str, ...] = ()
    open_for: Tuple[str, ...] = ()
    from_env: bool = True


def _row(
    name: str, methods: Tuple[str, ...] = (), open_for: Tuple[str, ...] = (), from_env: bool = True
) -> LauncherVariable:
    """A row for ``name``; its field is the one the shim's contract table names (``launcher.<field>``)."""
    field = VARIABLES[name].sdk_field or ""
    if not field.startswith("launcher."):
        raise ValueError(f"{name} is not a launcher variable in the contract table (sdk_field {field!r})")
    return LauncherVariable(name, field[len("launcher.") :], methods, open_for, from_env)


_ROWS = (
    _row(Name.MA_TORCHRUN_MASTER_PORT, ("torchrun",), ("torchrun",)),
    _row(Name.MALAUNCH_MASTER_PORT, ("ranktable",), ("ranktable",)),
    _row(Name.MA_EXTRA_TORCHRUN_PARAMS),
    _row(Name.MA_MSRUN_MASTER_PORT, (), ("msrun",)),
    _row(Name.MA_EXTRA_MSRUN_PARAMS),
    _row(Name.MSRUN_CLUSTER_TIME_OUT),
    _row(Name.MS_RANKTABLE_ENABLE, ("msrun",)),
    _row(Name.MALAUNCH_GRACE_PERIOD),
    _row(Name.MA_MAX_RESTARTS, from_env=False),
    _row(Name.MALAUNCH_RESTART_ON, from_env=False),
    _row(Name.MALAUNCH_COORDINATOR_PORT, (), RUN_METHODS, from_env=False),
    _row(Name.MALAUNCH_HEARTBEAT_TIMEOUT, from_env=False),
    _row(Name.MALAUNCH_HOST_WAIT, from_env=False),
    _row(Name.MALAUNCH_HANG_TIMEOUT, from_env=False),
    _row(Name.MALAUNCH_MIN_HOSTS, ("torchrun",), from_env=False),
    _row(Name.MALAUNCH_PREPARE, from_env=False),
    _row(Name.MALAUNCH_PREPARE_TIMEOUT, from_env=False),
)

#: Platform variable -> its row; the order is the order variables are written in.
LAUNCHER_VARIABLES: Mapping[str, LauncherVariable] = types.MappingProxyType({row.name: row for row in _ROWS})


_SECONDS_FIELDS = ("grace_period", "heartbeat_timeout", "host_wait", "hang_timeout", "prepare_timeout")


def _text(opts: LauncherOptions, field: str) -> Optional[str]:
    """The variable's value for ``field``, or ``None`` when the field is unset (rule 1)."""
    value = getattr(opts, field)
    if field.endswith("_params"):
        return shlex.join(value) if value else None
    if field == "msrun_rank_table":
        return "True" if value else None
    if field == "prepare":  # the shim reads it as JSON: a list of argv lists
        return json.dumps([list(step) for step in value], ensure_ascii=False) if value else None
    if field in _SECONDS_FIELDS:
        return None if value is None else f"{value:g}"
    if field == "max_restarts":
        return str(value) if value else None
    if field == "restart_on":
        if not opts.max_restarts:
            return None
        return value if isinstance(value, str) else ",".join(str(code) for code in value)
    return None if value is None else str(value)


def launcher_env(spec: JobSpec, *, open_port: Optional[str] = None) -> Dict[str, str]:
    """The launcher variables for ``spec`` (see the module docstring); pure.

    Args:
        spec: the job.
        open_port: the value for a port the job file leaves open, or ``None`` to leave it unset.
    """
    method = spec.run_method
    env: Dict[str, str] = {}
    for row in _ROWS:
        if row.methods and method not in row.methods:
            continue
        text = _text(spec.launcher, row.field)
        if text is None and open_port is not None and method in row.open_for:
            text = open_port
        if text is not None:
            env[row.name] = text
    return env
