"""Load job files: YAML text or a plain mapping -> :class:`~malaunch.sdk.spec.JobSpec`.

Contract:

1. Any input (any YAML text, any nested mapping) either yields a valid ``JobSpec`` or raises
   :class:`~malaunch.sdk.errors.SpecError`; nothing else escapes (a hypothesis test enforces this).
2. Unknown keys are errors with a did-you-mean (``resources.gpus: unknown field, ... did you mean
   devices_per_host?``); duplicate keys in YAML are errors too.
3. Relative ``code_dir`` and input/output ``path`` values are resolved against ``base_dir`` (the job file's
   folder); ``obs://`` and other URLs are left as they are.
4. Scalars are converted only where it is unambiguous: numbers in ``args`` and ``env`` values become strings;
   ``torchrun_extra_params``/``msrun_extra_params`` may be a list of words or one shell-style string;
   ``launcher.restart_on`` is a word or a list of exit codes.
5. The platform's launcher variables may be set in ``env`` as a ModelArts job does (:data:`LAUNCHER_ENV`:
   ``MA_TORCHRUN_MASTER_PORT``, ``MA_EXTRA_TORCHRUN_PARAMS``, ``MSRUN_CLUSTER_TIME_OUT``,
   ``MA_RUN_METHOD``, ...; the same table the backends write them from, :mod:`malaunch.sdk.spec.contract`).
   They are moved into the field they stand for; a field already set to another value is an error naming
   both. Variables only the platform sets (``MA_NUM_HOSTS``, ``VC_TASK_INDEX``, ...) stay refused.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import shlex
import types
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import yaml
from malaunch.entrypoint.public import int_bounds

from ..backends import option_sections, options_hook
from ..errors import SpecError, show_value
from ..notify.fromdata import targets_from_data
from ..notify.targets import TARGET_KEYS
from ..redact import MASK, is_secret_name
from ..units import parse_duration
from .contract import LAUNCHER_VARIABLES
from .model import RUN_METHODS, CheckpointOptions, DataSpec, JobSpec, LauncherOptions, Resources, key_text
from .trials import check_trial_variables

__all__ = ["JOB_FIELDS", "LAUNCHER_ENV", "load_job_file", "load_job_text", "read_job_data", "spec_from_mapping"]

#: Launcher variables a job's ``env`` may set, and the field each stands for (``launcher.<name>`` or ``run_method``).
LAUNCHER_ENV: Mapping[str, str] = types.MappingProxyType(
    {
        "MA_RUN_METHOD": "run_method",
        **{name: f"launcher.{row.field}" for name, row in LAUNCHER_VARIABLES.items() if row.from_env},
    }
)  # one table with the backends' direction: malaunch.sdk.spec.contract
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")

_TOP_CORE = (
    "name", "run_method", "code_dir", "boot_file", "args", "image", "resources", "env", "inputs", "outputs",
    "backend", "launcher", "sweep", "keep_for", "notify", "notify_timeout", "priority", "checkpoint", "resume_from",
)  # fmt: skip
_RESOURCES = ("hosts", "devices_per_host", "flavor", "pool")
_LAUNCHER = (
    "master_port", "torchrun_extra_params", "msrun_master_port", "msrun_extra_params", "msrun_cluster_time_out",
    "msrun_rank_table", "grace_period", "max_restarts", "restart_on", "coordinator_port", "heartbeat_timeout",
    "host_wait", "hang_timeout", "min_hosts", "prepare", "prepare_timeout",
)  # fmt: skip
_DATA = ("name", "path")
_CHECKPOINT = ("keep", "volume", "obs_path")
_SWEEP = ("params", "random", "seed", "max_parallel", "stop_on_failure", "metric")


def _top() -> Tuple[str, ...]:
    """The keys of a job file's top level: the core's, with each backend's own section (``volcano:``,
    ``modelarts:``, as the registry has them) after ``launcher``."""
    at = _TOP_CORE.index("sweep")
    return (*_TOP_CORE[:at], *(section.name for section in option_sections()), *_TOP_CORE[at:])


class _JobFields(Mapping[str, Tuple[str, ...]]):
    """Section ("" for the top level) -> the keys a job file may use in it, the backends' sections as the registry
    has them when asked."""

    def _now(self) -> Dict[str, Tuple[str, ...]]:
        return {
            "": _top(),
            "resources": _RESOURCES,
            "launcher": _LAUNCHER,
            "data": _DATA,
            "checkpoint": _CHECKPOINT,
            **{section.name: section.keys for section in option_sections()},
            "sweep": _SWEEP,
            "notify": TARGET_KEYS,
        }

    def __getitem__(self, key: str) -> Tuple[str, ...]:
        return self._now()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._now())

    def __len__(self) -> int:
        return len(self._now())


#: The keys a job file may use, per section.
JOB_FIELDS: Mapping[str, Tuple[str, ...]] = _JobFields()

# Words people reach for, mapped to our field names (did-you-mean beyond spelling).
_ALIASES = {
    "gpus": "devices_per_host", "npus": "devices_per_host", "devices": "devices_per_host",
    "gpus_per_host": "devices_per_host", "nproc_per_node": "devices_per_host", "nodes": "hosts",
    "node_count": "hosts", "nnodes": "hosts", "min_nodes": "min_hosts", "min_nnodes": "min_hosts",
    "replicas": "hosts", "instances": "hosts", "method": "run_method",
    "launcher_type": "run_method", "script": "boot_file", "entrypoint": "boot_file", "command": "boot_file",
    "environment": "env", "environments": "env", "envs": "env", "arguments": "args", "parameters": "args",
    "code": "code_dir", "source_dir": "code_dir", "working_dir": "code_dir", "master_addr_port": "master_port",
    "image_url": "image", "resource": "resources",
}  # fmt: skip
_REQUIRED = ("name", "code_dir", "boot_file")
_EMPTY_HINT = "write the job's fields into it, at least name:, code_dir: and boot_file:"
_URL_PREFIXES = ("obs://", "s3://", "http://", "https://")


def _suggest(key: str, known: Tuple[str, ...]) -> str:
    lowered = key.lower()
    if lowered in known and lowered != key:
        return f"did you mean {lowered}?"
    alias = _ALIASES.get(lowered)
    if alias in known:
        return f"did you mean {alias}?"
    homes = [section for section, fields in JOB_FIELDS.items() if section and alias in fields]
    if alias is not None and homes:  # a section's field written elsewhere (gpus: at the top, for resources)
        return f"did you mean {homes[0]}.{alias}?"
    close = difflib.get_close_matches(lowered, known, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]}?"
    elsewhere = {f"{section}.{field}": field for section, fields in JOB_FIELDS.items() if section for field in fields
                 if fields is not known}  # fmt: skip
    close = difflib.get_close_matches(lowered, list(elsewhere.values()), n=1, cutoff=0.8)
    if close:  # a section's field, spelt nearly right, in another place
        return f"did you mean {next(path for path, field in elsewhere.items() if field == close[0])}?"
    return f"known fields: {', '.join(known)}"


def _mapping(value: object, path: str, known: Tuple[str, ...]) -> Dict[str, Any]:
    if value is None and not path:  # an empty file, or one of comments only: YAML's null
        raise SpecError("(top level)", "the job file is empty (no field: value in it)", None, _EMPTY_HINT)
    if not isinstance(value, Mapping):
        problem = "must be a mapping of field: value" if path else "the job file must be a mapping of field: value"
        raise SpecError(path or "(top level)", problem, value)
    out: Dict[str, Any] = {}
    for key, item in value.items():
        where = f"{path}.{key_text(key)}" if path else key_text(key)
        if not isinstance(key, str) or key not in known:
            raise SpecError(where, "unknown field", key, _suggest(str(key), known))
        out[key] = item
    return out


def _words(value: object, path: str) -> Tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise SpecError(path, f"is not valid shell-style words ({exc})", value, "check the quotes") from None
    return _strings(value, path, convert_numbers=False)


def _strings(value: object, path: str, convert_numbers: bool) -> Tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise SpecError(path, "must be a list of strings", value)
    out: List[str] = []
    for index, item in enumerate(value):
        out.append(_scalar_text(item, f"{path}[{index}]", convert_numbers))
    return tuple(out)


def _scalar_text(value: object, path: str, convert_numbers: bool) -> str:
    if isinstance(value, str):
        return value
    if convert_numbers and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if value is None:  # "A:" with nothing after it: YAML's null, which "got ..." cannot show
        raise SpecError(path, "has no value (null)", None,
                        "give it a value, or '' for an empty text")  # fmt: skip
    expected = "a string or a number (quote it)" if convert_numbers else "a string"
    raise SpecError(path, f"must be {expected}", value)


def _resolve(path: Optional[object], base_dir: Optional[str]) -> Optional[object]:
    if not isinstance(path, str) or base_dir is None or not path.strip():
        return path
    if path.startswith(_URL_PREFIXES) or os.path.isabs(path):
        return path
    return os.path.normpath(os.path.join(base_dir, os.path.expanduser(path)))


def _data_list(value: object, path: str, base_dir: Optional[str]) -> Tuple[DataSpec, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise SpecError(path, "must be a list of {name, path} mappings", value)
    items: List[DataSpec] = []
    for index, raw in enumerate(value):
        where = f"{path}[{index}]"
        fields = _mapping(raw, where, _DATA)
        if "name" not in fields:
            raise SpecError(f"{where}.name", "is required", None)
        fields["path"] = _resolve(fields.get("path"), base_dir)
        items.append(_build(DataSpec, fields, where))
    return tuple(items)


def _build(cls: Any, fields: Dict[str, Any], prefix: str) -> Any:
    try:
        return cls(**fields)
    except SpecError as error:
        # The dataclass names its field from its own point of view ("data.name"); re-root it here.
        tail = error.field.split(".", 1)[1] if "." in error.field else error.field
        raise SpecError(f"{prefix}.{tail}", error.problem, error.value, error.hint) from None


def _env(value: object) -> Dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError("env", "must be a mapping of NAME: value", value)
    out: Dict[str, str] = {}
    for key, item in value.items():
        try:
            out[str(key)] = _scalar_text(item, f"env.{key_text(key)}", True)
        except SpecError as error:
            if not is_secret_name(str(key)):
                raise
            raise SpecError(error.field, error.problem, MASK, error.hint) from None
    return out


def _section(value: object, path: str, cls: Any, known: Tuple[str, ...], base_dir: Optional[str] = None) -> Any:
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    fields = _mapping(value, path, known)
    if cls is LauncherOptions:
        for key in ("torchrun_extra_params", "msrun_extra_params"):
            if key in fields:
                fields[key] = _words(fields[key], f"{path}.{key}")
        if isinstance(fields.get("restart_on"), list):
            fields["restart_on"] = tuple(fields["restart_on"])
        if isinstance(fields.get("prepare"), list):  # a string stays one: the check refuses it in one line
            fields["prepare"] = tuple(tuple(step) if isinstance(step, list) else step for step in fields["prepare"])
        if fields.get("prepare", ()) is None:
            fields["prepare"] = ()
        if fields.get("max_restarts", 0) is None:
            fields["max_restarts"] = 0
        if fields.get("restart_on", "") is None:
            fields["restart_on"] = "retryable"
    hook = options_hook(path)  # a backend's own section is read by the backend (its options module)
    if hook is not None:
        fields = hook(fields, path, lambda value: _resolve(value, base_dir))
    return _build(cls, fields, path)


def spec_from_mapping(data: object, base_dir: Optional[str] = None) -> JobSpec:
    """Build a :class:`JobSpec` from job-file data (parsed YAML, or keyword arguments of ``Job``).

    Raises:
        SpecError: the first invalid field, with its path and value.
    """
    fields = _mapping(data, "", _top())
    if fields.pop("sweep", None) is not None:  # read by malaunch.sdk.sweep, which passes the rest here
        raise SpecError("sweep", "makes this job file a sweep of many trials", "sweep: {...}",
                        "run it with 'ma-submit sweep JOB.yaml' (or Sweep.from_yaml in Python)")  # fmt: skip
    for key in _REQUIRED:
        if key in fields and fields[key] is None:  # "name:" with nothing after it
            raise SpecError(key, "is required, and has no value here (null)", None, f"write its value after '{key}:'")
        if fields.get(key) is None:
            raise SpecError(key, "is required", None, f"add '{key}:' to the job file")
    fields["code_dir"] = _resolve(fields["code_dir"], base_dir)
    if "args" in fields:
        fields["args"] = _strings(fields["args"], "args", convert_numbers=True)
    if "env" in fields:
        fields["env"] = _env(fields["env"])
    for kind in ("inputs", "outputs"):
        if kind in fields:
            fields[kind] = _data_list(fields[kind], kind, base_dir)
    fields["resources"] = _section(fields.get("resources"), "resources", Resources, _RESOURCES)
    fields["launcher"] = _section(fields.get("launcher"), "launcher", LauncherOptions, _LAUNCHER)
    sections = {}
    for section in option_sections():  # each backend's own section, read by the backend's hook
        value = fields.pop(section.name, None)
        if value is not None or not section.optional:
            sections[section.name] = _section(value, section.name, section.options, section.keys, base_dir)
    if "keep_for" in fields:
        fields["keep_for"] = _keep_for(fields["keep_for"])
    if "notify" in fields:
        fields["notify"] = targets_from_data(fields["notify"])
    if isinstance(fields.get("notify_timeout"), str):
        fields["notify_timeout"] = _duration("notify_timeout", fields["notify_timeout"])
    if fields.get("checkpoint") is not None:
        fields["checkpoint"] = _section(fields["checkpoint"], "checkpoint", CheckpointOptions, _CHECKPOINT)
    for key in ("run_method", "backend", "image", "keep_for", "notify_timeout", "priority", "checkpoint",
                "resume_from"):
        if key in fields and fields[key] is None:
            del fields[key]
    if fields.get("env"):
        _take_launcher_env(fields)
    return JobSpec(**fields, sections=sections)


def _keep_for(value: object) -> object:
    """``keep_for`` as seconds: a number as it is, a text like ``7d`` parsed (the model checks the rest)."""
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError:
            raise SpecError("keep_for", "must be a duration (seconds, or 90s, 30m, 12h, 7d, 2w)", value) from None
    return value


def _duration(field: str, text: str) -> float:
    """A duration text (``30``, ``90s``, ``2m``) as seconds."""
    try:
        return parse_duration(text)
    except ValueError:
        raise SpecError(field, "must be a duration (seconds, or 90s, 30m)", text) from None


def _env_value(name: str, text: str, target: str) -> object:
    """``text`` of variable ``name`` as the value of field ``target``."""
    where, value = f"env.{name}", text.strip()
    try:
        if target == "run_method":
            if value.lower() not in RUN_METHODS:
                raise ValueError(f"must be one of {', '.join(RUN_METHODS)}")
            return value.lower()
        if target.endswith("_params"):
            return tuple(shlex.split(text))
        if target.endswith("_port"):
            port = int(value)
            if not 1 <= port <= 65535:
                raise ValueError("must be a port number 1-65535")
            return port
        if target.endswith("cluster_time_out"):
            seconds, lowest = int(value), int_bounds(name)[0]  # the shim's bound: -1 waits forever
            if seconds < lowest:
                raise ValueError(f"must be a whole number of seconds >= {lowest}")
            return seconds
        if target.endswith("rank_table"):
            if value.lower() not in _TRUE + _FALSE:
                raise ValueError("must be True or False")
            return value.lower() in _TRUE
        grace = float(value)
        if not 0 <= grace < float("inf"):
            raise ValueError("must be a number of seconds >= 0")
        return grace
    except ValueError as exc:
        problem = str(exc) if str(exc).startswith("must") else f"cannot be used for {target} ({exc})"
        raise SpecError(where, problem, text, "fix the job file") from None


def _take_launcher_env(fields: Dict[str, Any]) -> None:
    """Move the launcher variables of ``fields["env"]`` into the fields they stand for (in place)."""
    env: Dict[str, str] = dict(fields["env"])
    launcher: LauncherOptions = fields["launcher"]
    defaults = LauncherOptions()
    changes: Dict[str, Any] = {}
    source: Dict[str, str] = {}
    for name, target in LAUNCHER_ENV.items():
        if name not in env:
            continue
        value = _env_value(name, env.pop(name), target)
        if target == "run_method":
            current, is_set = fields.get("run_method"), "run_method" in fields
        else:
            key = target.split(".", 1)[1]
            current = changes.get(key, getattr(launcher, key))
            is_set = key in changes or current != getattr(defaults, key)
        if is_set and current != value:
            other = f"env.{source[target]}" if target in source else target
            raise SpecError(
                f"env.{name}", f"conflicts with {other} ({show_value(current)})", value,
                "set only one of them, or give both the same value",
            )  # fmt: skip
        source[target] = name
        if target == "run_method":
            fields["run_method"] = value
        else:
            changes[target.split(".", 1)[1]] = value
    fields["env"] = env
    if changes:
        fields["launcher"] = dataclasses.replace(launcher, **changes)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> Dict[Any, Any]:
    loader.flatten_mapping(node)
    out: Dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in out
        except TypeError:
            raise SpecError(key_text(key), "is not a valid key", key) from None
        if duplicate:
            line = key_node.start_mark.line + 1
            raise SpecError(key_text(key), f"is given twice (again on line {line})", key, "keep one of them")
        out[key] = loader.construct_object(value_node, deep=True)
    return out


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _parse_yaml(text: str) -> object:
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if mark is None:
            raise SpecError("the file", f"is not valid YAML ({problem})", None, "fix the YAML syntax") from None
        context, start = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if start is not None and context and mark.line >= len(text.splitlines()):  # at the end: say where it began
            problem, mark = f"{problem} {context}", start
        where = f"line {mark.line + 1}, column {mark.column + 1}"
        bad = _bad_line(text, mark.line)
        raise SpecError(where, f"is not valid YAML ({problem})", bad, "fix the YAML syntax") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise SpecError("(top level)", f"could not be read as YAML ({exc})", None) from None


_KEY_VALUE = re.compile(r"(\s*(?:-\s*)?[\"']?([A-Za-z0-9_.-]+)[\"']?\s*:)(.*)")


def _bad_line(text: str, index: int) -> Optional[str]:
    """Line ``index`` (from 0) of ``text`` (the last line past the end), a secret's value masked; None if empty."""
    lines = text.splitlines()
    if not lines or index < 0:
        return None
    line = lines[min(index, len(lines) - 1)]
    match = _KEY_VALUE.match(line)
    if match and match.group(3).strip() and is_secret_name(match.group(2)):
        return f"{match.group(1)} {MASK}"
    return line


def load_job_text(text: str, base_dir: Optional[str] = None, source: Optional[str] = None) -> JobSpec:
    """Parse job-file YAML ``text``; ``source`` names the file in error messages."""
    try:
        spec = spec_from_mapping(_parse_yaml(text), base_dir)
        check_trial_variables(spec.env)  # a sweep's own; a trial's spec is read back with spec_from_mapping
        return spec
    except SpecError as error:
        raise error.with_source(source) if source else error from None


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise SpecError("job file", f"cannot be read ({reason})", path, "check the path") from None
    except UnicodeDecodeError as exc:
        problem = f"is not a text (YAML) file (byte {exc.start} is not UTF-8)"
        raise SpecError("job file", problem, path, "give the path of the job's YAML file") from None
    if "\x00" in text:
        problem = f"is not a text (YAML) file (a NUL byte at offset {text.index(chr(0))})"
        raise SpecError("job file", problem, path, "give the path of the job's YAML file") from None
    return text


def read_job_data(path: str) -> Tuple[object, str]:
    """A job file's parsed YAML (duplicate keys refused) and its folder, for readers of extra sections (sweep)."""
    text = _read_text(path)
    try:
        return _parse_yaml(text), os.path.dirname(os.path.abspath(path))
    except SpecError as error:
        raise error.with_source(path) from None


def load_job_file(path: str) -> JobSpec:
    """Read and validate a job file; relative paths in it are relative to its folder."""
    base_dir = os.path.dirname(os.path.abspath(path))
    return load_job_text(_read_text(path), base_dir=base_dir, source=path)
