"""The launch plan: pure, frozen data describing exactly which processes the shim starts.

A plan is built by :mod:`malaunch.entrypoint.launchers` from a
:class:`~malaunch.entrypoint.contract.cluster_env.ClusterEnv`
and executed by :mod:`malaunch.entrypoint.run.supervisor`. ``--dry-run`` prints :meth:`LaunchPlan.to_json`; the
supervisor runs the very same object, so the two cannot disagree.

Each :class:`ProcessSpec` lists only the variables the shim sets for that process (``env``, and
``env_defaults``, which apply only where the inherited environment lacks them); the process also inherits the
shim's own environment. How each rank's output reaches its log file is given by ``log_source``:

- ``"pipe"``: one process per rank; the shim reads its stdout/stderr pipes (rank-table fan-out, single run).
- ``"attempt_files"``: one launcher that hands each worker files of its own as stdout and stderr, a folder per
  attempt (torchrun ``--redirects=3 --log_dir``); the shim follows them into the rank logs and to the console,
  and keeps the launcher's own output in the process's ``log_file``.
- ``"files"``: the launcher writes one log file per rank itself (msrun ``worker_N.log``); the shim follows
  those files to the console.

Both are named tuples (frozen; ``plan._replace(...)`` makes a changed copy): the shim builds them before its
first rank starts, and a named tuple costs a fraction of a dataclass to define and to import.
"""


from __future__ import annotations

from types import MappingProxyType
from typing import Any, Dict, Mapping, NamedTuple, Optional, Tuple, Union

from ..contract import VARIABLES
from ..contract.prepare_steps import PrepareSteps
from .jsontext import dumps_indented

__all__ = ["LOG_SOURCES", "METHODS", "LaunchPlan", "ProcessSpec"]

#: The contract's ``MA_RUN_METHOD`` choices, and ``single`` (neither a method nor a rank table given).
METHODS = (*VARIABLES["MA_RUN_METHOD"].choices, "single")
LOG_SOURCES = ("pipe", "attempt_files", "files")
_EMPTY: Mapping[str, str] = MappingProxyType({})  # the shared default of the mapping fields: nobody can change it


class ProcessSpec(NamedTuple):
    """One process the shim starts: argv list (never a shell string), the variables it sets, the cwd."""

    name: str
    argv: Tuple[str, ...]
    env: Mapping[str, str]
    cwd: Optional[str]
    log_file: str
    rank: Optional[int] = None  # global rank, when this process is exactly one rank
    local_rank: Optional[int] = None
    # Variables set only when the inherited environment lacks them (the user's own value wins).
    env_defaults: Mapping[str, str] = _EMPTY
    script_at: Optional[int] = None  # a launcher's argv: where the command it starts per worker begins

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready form, as printed by ``--dry-run``."""
        return {
            "name": self.name,
            "argv": list(self.argv),
            "env": dict(sorted(self.env.items())),
            "cwd": self.cwd,
            "log_file": self.log_file,
            "rank": self.rank,
            "local_rank": self.local_rank,
            "env_defaults": dict(sorted(self.env_defaults.items())),
            **({} if self.script_at is None else {"script_at": self.script_at}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessSpec:
        """Inverse of :meth:`to_json`: every field, each checked for its type.

        Raises:
            ValueError: a field is missing or of the wrong type.
        """
        return cls(
            name=_text(data, "name"),
            argv=tuple(_texts(data, "argv")),
            env=_text_map(data, "env"),
            cwd=_optional_text(data, "cwd"),
            log_file=_text(data, "log_file"),
            rank=_optional_int(data, "rank"),
            local_rank=_optional_int(data, "local_rank"),
            env_defaults=_text_map(data, "env_defaults"),
            script_at=_optional_int(data, "script_at") if "script_at" in data else None,
        )


class _PlanFields(NamedTuple):
    """The fields of :class:`LaunchPlan` (a named tuple cannot check its values itself; the subclass does)."""

    method: str
    node_rank: int
    num_hosts: int
    host: str  # this host's name as the report shows it
    processes: Tuple[ProcessSpec, ...]
    log_source: str
    log_dir: str
    rank_logs: Mapping[int, str]  # global rank -> per-rank log file
    grace_period: float
    report_file: str
    notes: Tuple[str, ...] = ()  # human-readable facts about the plan (shown by --dry-run)
    files: Mapping[str, str] = _EMPTY  # path -> text the supervisor writes before starting (``#!``: executable)
    # The launcher's workers carry their rank in their environment; the supervisor watches them and ends the job
    # as soon as one of them is a zombie with a failing status, before the launcher's own (slower) reaction.
    watch_workers: bool = False
    # The launcher restarts its workers itself (torchrun --max_restarts): the supervisor applies this
    # ``restart_on`` (a choice word or exit codes) to each worker failure and ends the job, root cause that
    # worker, when it does not accept it, before the launcher starts another attempt. None: no such check.
    restart_on: Optional[Union[str, Tuple[int, ...]]] = None
    # Commands every host runs before its first attempt (MALAUNCH_PREPARE, run/prepare_steps.py); None: none.
    prepare: Optional[PrepareSteps] = None
    # The folder where each process the launcher starts records its rank as it is born, keyed by its pid and start
    # time (msrun: run/procs/births.py); the worker watch reads it when a worker's environment is gone. None: none.
    births: Optional[str] = None


class LaunchPlan(_PlanFields):
    """Everything the supervisor needs; built once, never mutated. An unknown ``method`` or ``log_source`` is
    refused when the plan is made (``ValueError``: a planner bug, not a user error)."""

    __slots__ = ()

    def __new__(
        cls,
        method: str,
        node_rank: int,
        num_hosts: int,
        host: str,
        processes: Tuple[ProcessSpec, ...],
        log_source: str,
        log_dir: str,
        rank_logs: Mapping[int, str],
        grace_period: float,
        report_file: str,
        notes: Tuple[str, ...] = (),
        files: Mapping[str, str] = _EMPTY,
        watch_workers: bool = False,
        restart_on: Optional[Union[str, Tuple[int, ...]]] = None,
        prepare: Optional[PrepareSteps] = None,
        births: Optional[str] = None,
    ) -> LaunchPlan:
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}")
        if log_source not in LOG_SOURCES:
            raise ValueError(f"unknown log_source {log_source!r}")
        return super().__new__(cls, method, node_rank, num_hosts, host, processes, log_source, log_dir, rank_logs,
                               grace_period, report_file, notes, files, watch_workers, restart_on,
                               prepare, births)  # fmt: skip

    def to_json(self) -> Dict[str, Any]:
        """The plan as JSON-ready data: ``{"method": ..., "processes": [{"argv", "env", "cwd", ...}], ...}``."""
        return {
            "method": self.method,
            "node_rank": self.node_rank,
            "num_hosts": self.num_hosts,
            "host": self.host,
            "processes": [proc.to_json() for proc in self.processes],
            "log_source": self.log_source,
            "log_dir": self.log_dir,
            "rank_logs": {str(rank): path for rank, path in sorted(self.rank_logs.items())},
            "grace_period": self.grace_period,
            "report_file": self.report_file,
            "notes": list(self.notes),
            "files": dict(sorted(self.files.items())),
            "watch_workers": self.watch_workers,
            "restart_on": list(self.restart_on) if isinstance(self.restart_on, tuple) else self.restart_on,
            **({} if self.prepare is None else {"prepare": self.prepare.to_json()}),
            **({} if self.births is None else {"births": self.births}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LaunchPlan:
        """Inverse of :meth:`to_json`: ``LaunchPlan.from_json(plan.to_json()) == plan`` for every plan, every
        field kept (a recovery unit reads its one-process plan from a file this way).

        Raises:
            ValueError: a field is missing or of the wrong type, or the method or log source is unknown.
        """
        processes = data.get("processes")
        rank_logs = _text_map(data, "rank_logs")
        restart_on = data.get("restart_on")
        if isinstance(restart_on, list):
            restart_on = tuple(_whole(code, "restart_on") for code in restart_on)
        elif restart_on is not None and not isinstance(restart_on, str):
            raise ValueError(f"plan field restart_on: expected a word, exit codes or null, got {restart_on!r}")
        grace = data.get("grace_period")
        if isinstance(grace, bool) or not isinstance(grace, (int, float)):
            raise ValueError(f"plan field grace_period: expected a number, got {grace!r}")
        watch = data.get("watch_workers")
        if not isinstance(watch, bool):
            raise ValueError(f"plan field watch_workers: expected true or false, got {watch!r}")
        if not isinstance(processes, list) or not all(isinstance(item, dict) for item in processes):
            raise ValueError("plan field processes: expected a list of objects")
        return cls(
            method=_text(data, "method"),
            node_rank=_whole(data.get("node_rank"), "node_rank"),
            num_hosts=_whole(data.get("num_hosts"), "num_hosts"),
            host=_text(data, "host"),
            processes=tuple(ProcessSpec.from_json(item) for item in processes),
            log_source=_text(data, "log_source"),
            log_dir=_text(data, "log_dir"),
            rank_logs={_whole(rank, "rank_logs", digits=True): path for rank, path in rank_logs.items()},
            grace_period=float(grace),
            report_file=_text(data, "report_file"),
            notes=tuple(_texts(data, "notes")),
            files=_text_map(data, "files"),
            watch_workers=watch,
            restart_on=restart_on,
            prepare=_prepare(data.get("prepare")),
            births=_optional_text(data, "births"),
        )

    def render(self) -> str:
        """Pretty JSON text of :meth:`to_json`."""

        return dumps_indented(self.to_json())


# ---- reading a plan's JSON back (types checked: the file may have been damaged)


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ValueError(f"plan field {key}: expected text, got {value!r}")
    return value


def _optional_text(data: Mapping[str, Any], key: str) -> Optional[str]:
    return None if data.get(key) is None else _text(data, key)


def _texts(data: Mapping[str, Any], key: str) -> Tuple[str, ...]:
    value = data.get(key)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"plan field {key}: expected a list of text, got {value!r}")
    return tuple(value)


def _text_map(data: Mapping[str, Any], key: str) -> Dict[str, str]:
    value = data.get(key)
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"plan field {key}: expected an object of text, got {value!r}")
    return dict(value)


def _whole(value: Any, key: str, *, digits: bool = False) -> int:
    if digits and isinstance(value, str) and value.lstrip("-").isdigit() and value.isascii():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"plan field {key}: expected a whole number, got {value!r}")
    return value


def _prepare(value: Any) -> Optional[PrepareSteps]:
    if value is None:
        return None
    steps = value.get("steps") if isinstance(value, dict) else None
    timeout = value.get("timeout") if isinstance(value, dict) else None
    if (not isinstance(steps, list) or not all(isinstance(step, list) and step and all(isinstance(word, str)
            for word in step) for step in steps) or isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
        raise ValueError(f"plan field prepare: expected steps (lists of text) and a timeout, got {value!r}")
    return PrepareSteps(tuple(tuple(step) for step in steps), float(timeout))


def _optional_int(data: Mapping[str, Any], key: str) -> Optional[int]:
    return None if data.get(key) is None else _whole(data.get(key), key)
