"""Sweeps, declared: a job file's ``sweep:`` section (or ``--param`` options) -> one :class:`JobSpec` per trial.

Everything here is pure: :func:`expand` turns a :class:`SweepSpec` and the job's :class:`JobSpec` into the
trials' specs without I/O or clock; ``random`` samples come from ``random.Random(seed)``, so the same inputs
give the same trials. The section, with every key::

    sweep:
      params:
        lr: [1.0e-3, 3.0e-4]               # a list: grid axis (random: one of them)
        batch: {choice: [32, 64]}          # the same as a list
        dropout: {uniform: [0.0, 0.5]}     # random only
        wd: {log_uniform: [1.0e-5, 1.0e-2]}  # random only
      random: 8            # 8 random trials; without it every combination of the lists (the grid)
      seed: 0              # random's seed (default 0)
      max_parallel: 2      # trials running at once (default: local -> what the machine holds; cloud -> all)
      stop_on_failure: false
      metric: {name: loss, regex: 'loss=([0-9.eE+-]+)', goal: minimize}

A value reaches the trial through ``{name}`` placeholders in ``args`` and ``env`` values (``{{`` and ``}}``
stand for literal braces); every trial also gets ``MALAUNCH_TRIAL_INDEX``, ``MALAUNCH_SWEEP_ID`` and
``MALAUNCH_PARAM_<NAME>`` for each parameter. A placeholder naming no parameter, a parameter no placeholder
uses, or a job ``env`` that sets one of those variables is a :class:`~malaunch.sdk.errors.SpecError` in one line.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import SpecError
from ..spec.checks import unknown_field
from ..spec.model import JobSpec
from ..spec.trials import PARAM_PREFIX, SWEEP_ID_VARIABLE, TRIAL_INDEX_VARIABLE, check_trial_variables

__all__ = [
    "GOALS",
    "PARAM_PREFIX",
    "SWEEP_ID_VARIABLE",
    "SWEEP_FIELDS",
    "TRIAL_INDEX_VARIABLE",
    "Metric",
    "Param",
    "SweepSpec",
    "Trial",
    "check_trial_variables",
    "describe_param",
    "expand",
    "format_value",
    "in_trial",
    "merge_params",
    "metric_from_mapping",
    "param_from_value",
    "param_variable",
    "parse_param_option",
    "parse_param_options",
    "sweep_from_mapping",
]

GOALS = ("minimize", "maximize")
#: The keys of a ``sweep:`` section.
SWEEP_FIELDS = ("params", "random", "seed", "max_parallel", "stop_on_failure", "metric")
KINDS = ("values", "choice", "uniform", "log_uniform")
MAX_TRIALS = 10000

Value = Union[str, int, float]
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def param_variable(name: str) -> str:
    """The variable a trial gets for parameter ``name``: ``MALAUNCH_PARAM_<NAME>``."""
    return PARAM_PREFIX + name.upper()


@dataclass(frozen=True)
class Param:
    """One parameter: ``kind`` ``values``/``choice`` (``values`` listed) or ``uniform``/``log_uniform`` (``low``,
    ``high``)."""

    name: str
    kind: str
    values: Tuple[Value, ...] = ()
    low: float = 0.0
    high: float = 0.0

    def to_json(self) -> Any:
        """The job-file form."""
        if self.kind == "values":
            return list(self.values)
        if self.kind == "choice":
            return {"choice": list(self.values)}
        return {self.kind: [self.low, self.high]}


@dataclass(frozen=True)
class Metric:
    """The objective: ``regex`` searched in the trial's output (group 1 if it has one), the last match wins."""

    name: str
    regex: str
    goal: str = "minimize"

    def to_json(self) -> Dict[str, str]:
        """The job-file form."""
        return {"name": self.name, "regex": self.regex, "goal": self.goal}


@dataclass(frozen=True)
class SweepSpec:
    """A whole sweep section. ``random`` None means the grid of all the lists."""

    params: Tuple[Param, ...]
    random: Optional[int] = None
    seed: int = 0
    max_parallel: Optional[int] = None
    stop_on_failure: bool = False
    metric: Optional[Metric] = None

    def to_json(self) -> Dict[str, Any]:
        """The job-file form (what ``sweep_from_mapping`` reads back)."""
        return {
            "params": {p.name: p.to_json() for p in self.params},
            "random": self.random,
            "seed": self.seed,
            "max_parallel": self.max_parallel,
            "stop_on_failure": self.stop_on_failure,
            "metric": None if self.metric is None else self.metric.to_json(),
        }


@dataclass(frozen=True)
class Trial:
    """One trial: its index, its parameter values (in declaration order) and its job spec."""

    index: int
    params: Mapping[str, Value] = field(default_factory=dict)
    spec: Optional[JobSpec] = None

    def params_text(self) -> str:
        """``lr=0.001 batch=32``."""
        return " ".join(f"{k}={format_value(v)}" for k, v in self.params.items())


def format_value(value: Value) -> str:
    """A parameter value as it is put into args and env: numbers in their shortest form."""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return str(value)


def _fail(path: str, problem: str, value: object, hint: str = "fix the sweep section") -> SpecError:
    return SpecError(path, problem, value, hint)


def _scalar(value: object, path: str) -> Value:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _fail(path, "must be a string or a number", value)
    if isinstance(value, float) and not math.isfinite(value):
        raise _fail(path, "must be a finite number", value)
    return value


def _number(value: object, path: str) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise _fail(path, "must be a number", value) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(path, "must be a finite number", value)
    return float(value)


def param_from_value(name: object, raw: object, path: str) -> Param:
    if not isinstance(name, str) or not _PARAM_NAME.match(name):
        raise _fail(path, "is not a parameter name (letters, digits, _; e.g. lr)", name)
    if isinstance(raw, (list, tuple)):
        kind, body = "values", raw
    elif isinstance(raw, Mapping) and len(raw) == 1 and next(iter(raw)) in KINDS[1:]:
        kind, body = str(next(iter(raw))), raw[next(iter(raw))]
        path = f"{path}.{kind}"
    else:
        raise _fail(path, "must be a list of values or {choice|uniform|log_uniform: [...]}", raw)
    if not isinstance(body, (list, tuple)) or not body:
        raise _fail(path, "must be a non-empty list", body)
    if kind in ("values", "choice"):
        values = tuple(_scalar(item, f"{path}[{i}]") for i, item in enumerate(body))
        return Param(name, kind, values=values)
    if len(body) != 2:
        raise _fail(path, "must be [low, high]", body)
    low, high = _number(body[0], f"{path}[0]"), _number(body[1], f"{path}[1]")
    if not low < high:
        raise _fail(path, "needs low < high", body)
    if kind == "log_uniform" and low <= 0:
        raise _fail(path, "needs low > 0 (a log scale)", body)
    return Param(name, kind, low=low, high=high)


def _int(value: object, path: str, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise _fail(path, f"must be a whole number {minimum}-{maximum}", value)
    return value


def metric_from_mapping(raw: object) -> Metric:
    if not isinstance(raw, Mapping):
        raise _fail("sweep.metric", "must be a mapping {name, regex, goal}", raw)
    for key in raw:
        if key not in ("name", "regex", "goal"):
            raise unknown_field(f"sweep.metric.{key}", key, ("name", "regex", "goal"))
    name, regex, goal = raw.get("name"), raw.get("regex"), raw.get("goal", "minimize")
    if not isinstance(name, str) or not name.strip():
        raise _fail("sweep.metric.name", "must be a non-empty string", name)
    if not isinstance(regex, str) or not regex:
        raise _fail("sweep.metric.regex", "must be a regular expression", regex)
    try:
        re.compile(regex)
    except re.error as exc:
        raise _fail("sweep.metric.regex", f"is not a valid regular expression ({exc})", regex) from None
    if goal not in GOALS:
        raise _fail("sweep.metric.goal", f"must be one of {', '.join(GOALS)}", goal)
    return Metric(name, regex, str(goal))


def sweep_from_mapping(data: object) -> SweepSpec:
    """A :class:`SweepSpec` from a ``sweep:`` section (parsed YAML); raises ``SpecError`` naming the field."""
    if not isinstance(data, Mapping):
        raise _fail("sweep", "must be a mapping with params (and random, seed, max_parallel, metric)", data)
    for key in data:
        if key not in SWEEP_FIELDS:
            raise unknown_field(f"sweep.{key}", key, SWEEP_FIELDS)
    raw_params = data.get("params")
    if not isinstance(raw_params, Mapping) or not raw_params:
        raise _fail("sweep.params", "must be a mapping of name: values", raw_params, "e.g. params: {lr: [0.1, 0.01]}")
    params = tuple(param_from_value(name, raw, f"sweep.params.{name}") for name, raw in raw_params.items())
    count = data.get("random")
    trials = None if count is None else _int(count, "sweep.random", 1, MAX_TRIALS)
    seed = _int(data.get("seed", 0) if data.get("seed") is not None else 0, "sweep.seed", 0, 2**63)
    parallel = data.get("max_parallel")
    max_parallel = None if parallel is None else _int(parallel, "sweep.max_parallel", 1, MAX_TRIALS)
    stop = data.get("stop_on_failure", False)
    if not isinstance(stop, bool):
        raise _fail("sweep.stop_on_failure", "must be true or false", stop)
    metric = None if data.get("metric") is None else metric_from_mapping(data["metric"])
    spec = SweepSpec(params, trials, seed, max_parallel, stop, metric)
    _check_kinds(spec)
    return spec


def _check_kinds(spec: SweepSpec) -> None:
    if spec.random is None:
        for param in spec.params:
            if param.kind in ("uniform", "log_uniform"):
                raise _fail(
                    f"sweep.params.{param.name}",
                    f"a {param.kind} range needs random: N",
                    param.to_json(),
                    "add 'random: N' (and 'seed:') to the sweep, or give a list of values",
                )
        size = math.prod(len(p.values) for p in spec.params)
        if size > MAX_TRIALS:
            raise _fail("sweep.params", f"make a grid of {size} trials (at most {MAX_TRIALS})", size, "use random: N")


def parse_param_option(text: str) -> Param:
    """``--param lr=1e-3,3e-4`` -> a list parameter (numbers where the word is one)."""
    name, sep, values = text.partition("=")
    if not sep or not values:
        raise SpecError("--param", "must be NAME=V1,V2,...", text, "e.g. --param lr=1e-3,3e-4")
    if not _PARAM_NAME.match(name.strip()):  # named on the command line: fixed there, not in the sweep section
        what = f"names {name.strip()!r}, not a parameter name (letters, digits, _)" if name.strip() else (
            "has an empty parameter name before '='")  # fmt: skip
        raise SpecError("--param", what, text, f"name it: --param lr={values}")
    words = [word.strip() for word in values.split(",")]
    parsed: List[object] = []
    for word in words:
        parsed.append(_word_value(word))
    return param_from_value(name.strip(), parsed, f"--param {name.strip()}")


def parse_param_options(texts: Sequence[str]) -> Tuple[Param, ...]:
    """Every ``--param NAME=V1,V2,...`` (:func:`parse_param_option`); a name given twice is refused, not the last one
    taken: the values the other gave would be dropped without a word."""
    params: Dict[str, Tuple[str, Param]] = {}
    for text in texts:
        param = parse_param_option(text)
        if param.name in params:
            given = (params[param.name][0], text)
            values = ",".join(word.strip() for one in given for word in one.partition("=")[2].split(","))
            what = f"is given twice (--param {given[0].strip()} and --param {given[1].strip()})"
            raise SpecError(f"--param {param.name}", what, None, f"give it once, with every value: --param "
                            f"{param.name}={values}")  # fmt: skip
        params[param.name] = (text, param)
    return tuple(param for _, param in params.values())


def _word_value(word: str) -> Value:
    for convert in (int, float):
        try:
            number = convert(word)
        except ValueError:
            continue
        if isinstance(number, float) and not math.isfinite(number):
            break
        return number
    return word


def _samples(spec: SweepSpec) -> List[Dict[str, Value]]:
    if spec.random is None:
        axes = [[(p.name, v) for v in p.values] for p in spec.params]
        return [dict(combo) for combo in itertools.product(*axes)]
    rng = random.Random(spec.seed)
    out: List[Dict[str, Value]] = []
    for _ in range(spec.random):
        row: Dict[str, Value] = {}
        for p in spec.params:
            if p.kind in ("values", "choice"):
                row[p.name] = p.values[rng.randrange(len(p.values))]
            elif p.kind == "uniform":
                row[p.name] = float(f"{rng.uniform(p.low, p.high):.6g}")
            else:
                row[p.name] = float(f"{math.exp(rng.uniform(math.log(p.low), math.log(p.high))):.6g}")
        out.append(row)
    return out


def _fill(text: str, values: Mapping[str, Value], path: str, used: set[str]) -> str:
    def one(match: re.Match[str]) -> str:
        whole, name = match.group(0), match.group(1)
        if name is None:
            return whole[0]
        if name not in values:
            known = ", ".join(values) or "none"
            raise SpecError(
                path,
                f"uses placeholder {{{name}}}, which names no sweep parameter",
                text,
                f"parameters: {known}; write {{{{ and }}}} for literal braces",
            )
        used.add(name)
        return format_value(values[name])

    return _PLACEHOLDER.sub(one, text)


def in_trial(error: SpecError, index: int, values: Mapping[str, Value]) -> SpecError:
    """``error`` naming the trial it was found in and the trial's values (``... in trial 1 (lr=0.01)``)."""
    shown = " ".join(f"{k}={format_value(v)}" for k, v in values.items())
    return SpecError(error.field, f"{error.problem} in trial {index} ({shown})", error.value, error.hint, error.source)


def expand(job: JobSpec, sweep: SweepSpec, sweep_id: str = "") -> List[Trial]:
    """The trials of ``sweep`` over ``job``, in order; pure (``random`` comes from ``sweep.seed``).

    Raises:
        SpecError: a placeholder naming no parameter, a parameter no placeholder uses, a reserved variable in
            ``env``, or a trial whose spec is invalid (with the trial's values in the message).
    """
    check_trial_variables(job.env)
    names = [p.name for p in sweep.params]
    seen_upper: Dict[str, str] = {}
    for name in names:
        other = seen_upper.setdefault(name.upper(), name)
        if other != name:
            raise _fail(f"sweep.params.{name}", f"clashes with {other} (both are {param_variable(name)})", name)
    probe = {name: 0 for name in names}
    used: set[str] = set()
    for index, arg in enumerate(job.args):
        _fill(arg, probe, f"args[{index}]", used)
    for key, value in job.env.items():
        _fill(value, probe, f"env.{key}", used)
    unused = [name for name in names if name not in used]
    if unused:
        name = unused[0]
        hint = "put {" + name + "} into args or an env value, or remove the parameter"
        raise _fail(f"sweep.params.{name}", "is used by no {" + name + "} placeholder in args or env", name, hint)
    trials: List[Trial] = []
    for index, values in enumerate(_samples(sweep)):
        scratch: set[str] = set()
        args = tuple(_fill(arg, values, f"args[{i}]", scratch) for i, arg in enumerate(job.args))
        env = {key: _fill(value, values, f"env.{key}", scratch) for key, value in job.env.items()}
        env[TRIAL_INDEX_VARIABLE] = str(index)
        if sweep_id:
            env[SWEEP_ID_VARIABLE] = sweep_id
        for key, chosen in values.items():
            env[param_variable(key)] = format_value(chosen)
        try:
            spec = job.replace(args=args, env=env)
        except SpecError as error:
            raise in_trial(error, index, values) from None
        trials.append(Trial(index, dict(values), spec))
    return trials


def describe_param(param: Param) -> str:
    """``lr: 0.001, 0.0003`` / ``wd: log_uniform 1e-05..0.01``."""
    if param.kind in ("values", "choice"):
        return f"{param.name}: {', '.join(format_value(v) for v in param.values)}"
    return f"{param.name}: {param.kind} {param.low:g}..{param.high:g}"


def merge_params(base: Sequence[Param], extra: Sequence[Param]) -> Tuple[Param, ...]:
    """``base`` with each of ``extra`` replacing the parameter of its name (or added at the end)."""
    out = {p.name: p for p in base}
    for param in extra:
        out[param.name] = param
    return tuple(out.values())
