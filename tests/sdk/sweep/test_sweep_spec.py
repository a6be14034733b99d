"""Sweeps without processes: the ``sweep:`` section and ``--param`` expanded into trial specs (pure, seeded),
the one-line errors, the objective read from a trial's lines, ranking, the record read defensively, and the
job schema's ``sweep:``."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Dict, List

import jsonschema
import pytest
import yaml
from click.testing import CliRunner, Result
from malaunch.sdk import SpecError, spec_from_mapping
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.cli import cli
from malaunch.sdk.errors import BackendError, SweepNotFound
from malaunch.sdk.spec.loader import JOB_FIELDS, load_job_file
from malaunch.sdk.sweep import Sweep, TrialResult, default_parallel, rank_results
from malaunch.sdk.sweep.run import UNKNOWN_GIVE_UP, is_done, metric_from_lines
from malaunch.sdk.sweep.spec import (
    SWEEP_FIELDS,
    expand,
    parse_param_option,
    sweep_from_mapping,
)
from malaunch.sdk.sweep.state import SweepPaths, read_record

REPO = Path(__file__).resolve().parents[3]
JOB: Dict[str, Any] = {
    "name": "demo",
    "code_dir": "/c",
    "boot_file": "t.py",
    "args": ["--lr", "{lr}", "--batch={batch}"],
    "env": {"OPT": "{opt}", "JSON": '{{"a": 1}}'},
}


def job(**changes: Any) -> Any:
    return spec_from_mapping({**JOB, **changes})


def test_a_grid_is_every_combination_in_order_with_values_as_placeholders_and_variables() -> None:
    sweep = sweep_from_mapping({"params": {"lr": [0.1, 0.01], "batch": [32, 64], "opt": ["adam"]}})
    trials = expand(job(), sweep, "demo-sweep-x")
    assert [dict(t.params) for t in trials] == [
        {"lr": 0.1, "batch": 32, "opt": "adam"},
        {"lr": 0.1, "batch": 64, "opt": "adam"},
        {"lr": 0.01, "batch": 32, "opt": "adam"},
        {"lr": 0.01, "batch": 64, "opt": "adam"},
    ]
    last = trials[3].spec
    assert last is not None
    assert last.args == ("--lr", "0.01", "--batch=64")
    assert dict(last.env) == {
        "OPT": "adam",
        "JSON": '{"a": 1}',  # {{ and }} are literal braces
        "MALAUNCH_TRIAL_INDEX": "3",
        "MALAUNCH_SWEEP_ID": "demo-sweep-x",
        "MALAUNCH_PARAM_LR": "0.01",
        "MALAUNCH_PARAM_BATCH": "64",
        "MALAUNCH_PARAM_OPT": "adam",
    }
    assert last.name == "demo"  # the same job name: on ModelArts every trial runs the same uploaded code


def test_random_samples_are_seeded_and_inside_their_ranges() -> None:
    section = {
        "params": {
            "lr": {"log_uniform": [1e-5, 1e-1]},
            "batch": {"choice": [16, 32, 64]},
            "opt": ["adam", "sgd"],
        },
        "random": 50,
        "seed": 3,
    }
    first = [dict(t.params) for t in expand(job(), sweep_from_mapping(section))]
    again = [dict(t.params) for t in expand(job(), sweep_from_mapping(section))]
    other = [dict(t.params) for t in expand(job(), sweep_from_mapping({**section, "seed": 4}))]
    assert first == again and first != other and len(first) == 50
    for row in first:
        assert 1e-5 <= row["lr"] <= 1e-1 and row["batch"] in (16, 32, 64) and row["opt"] in ("adam", "sgd")
    logs = [math.log10(row["lr"]) for row in first]
    assert min(logs) < -3.5 and max(logs) > -2.5  # spread over the decades, not bunched at the top
    uniform = sweep_from_mapping({"params": {"lr": {"uniform": [0.5, 0.6]}, "batch": [1], "opt": ["a"]}, "random": 9})
    assert all(0.5 <= t.params["lr"] <= 0.6 for t in expand(job(), uniform))


@pytest.mark.parametrize(
    ("section", "changes", "expected"),
    [
        ({"params": {"lr": [1], "batch": [1], "opt": ["a"], "wd": [0.1]}}, {}, "sweep.params.wd: is used by no {wd}"),
        ({"params": {"lr": [1], "batch": [1]}}, {}, "env.OPT: uses placeholder {opt}, which names no sweep param"),
        (
            {"params": {"lr": {"uniform": [0, 1]}, "batch": [1], "opt": ["a"]}},
            {},
            "sweep.params.lr: a uniform range needs random: N",
        ),
        (
            {"params": {"lr": [1], "batch": [1], "opt": ["a"]}},
            {"env": {"OPT": "{opt}", "MALAUNCH_TRIAL_INDEX": "1"}},
            "env.MALAUNCH_TRIAL_INDEX: is set for each trial by the sweep",
        ),
        (
            {"params": {"lr": {"log_uniform": [0, 1]}, "batch": [1], "opt": ["a"]}, "random": 2},
            {},
            "sweep.params.lr.log_uniform: needs low > 0",
        ),
        ({"params": {"lr": [1], "batch": [1], "opt": ["a"]}, "metric": {"name": "x", "regex": "("}}, {}, "regex"),
        ({"params": {"lr": [1], "batch": [1], "opt": ["a"]}, "max_paralel": 2}, {}, "sweep.max_paralel: unknown"),
        ({"params": {"lr": [1], "batch": [1], "opt": ["a"], "LR": [2]}}, {}, "clashes with lr"),
    ],
)
def test_mistakes_are_one_line_errors_naming_the_field(
    section: Dict[str, Any], changes: Dict[str, Any], expected: str
) -> None:
    with pytest.raises(SpecError) as caught:
        expand(job(**changes), sweep_from_mapping(section))
    message = str(caught.value)
    assert expected in message and "\n" not in message, message


def test_param_options_parse_numbers_and_words() -> None:
    param = parse_param_option("lr=1e-3,3e-4")
    assert (param.name, param.values) == ("lr", (0.001, 0.0003))
    assert parse_param_option("opt=adam,sgd").values == ("adam", "sgd")
    assert parse_param_option("batch=32,64").values == (32, 64)
    with pytest.raises(SpecError, match="--param: must be NAME=V1,V2"):
        parse_param_option("lr")


def test_sweep_object_merges_params_and_plans_every_trial_without_starting_any(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "t.py").write_text("print(1)\n")
    spec = job(code_dir=str(code))
    sweep = Sweep(spec, params={"lr": [0.1, 0.2], "batch": [1], "opt": {"choice": ["a"]}}, max_parallel=1)
    backend = LocalBackend(home=str(tmp_path / "home"))
    plan = sweep.plan(backend=backend, sweep_id="demo-sweep-1", now=1_700_000_000.0)
    assert [p.spec.env["MALAUNCH_TRIAL_INDEX"] for p in plan.plans] == ["0", "1"]
    text = plan.render()
    assert text.startswith("sweep demo-sweep-1 (dry run: nothing was started): 2 trial(s), grid, at most 1")
    assert "=== trial 1: lr=0.2 batch=1 opt=a" in text
    assert not (tmp_path / "home").exists()
    with pytest.raises(SpecError, match=r"sweep\.params"):
        Sweep(spec)


def test_a_job_file_with_a_sweep_is_refused_by_submit_and_read_by_sweep(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    data = {**JOB, "code_dir": ".", "sweep": {"params": {"lr": [1], "batch": [2]}}}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(SpecError, match=r"run it with 'ma-submit sweep JOB\.yaml'"):
        load_job_file(str(path))
    sweep = Sweep.from_yaml(str(path), params=[parse_param_option("opt=x,y")], max_parallel=3)
    assert [p.name for p in sweep.sweep.params] == ["lr", "batch", "opt"] and sweep.sweep.max_parallel == 3
    assert sweep.spec.code_dir == str(tmp_path)


def test_the_objective_is_the_last_match_of_the_root_cause_host_or_rank_0() -> None:
    lines = [
        "[host 0 rank 0] loss=3.0",
        "[host 0 rank 1] loss=9.0",
        "[host 1 rank 2] loss=7.0",
        "[host 0 rank 0] loss=2.5 acc=0.9",
        "[host 0 rank 1] loss=8.0",
        "[host 1 rank 2] loss=nan?",
    ]
    assert metric_from_lines(lines, r"loss=([0-9.]+)") == 2.5
    assert metric_from_lines(lines, r"loss=([0-9.]+)", host=1) == 7.0
    assert metric_from_lines(lines, r"acc=[0-9.]+") is None  # the whole match is no number
    assert metric_from_lines(["plain 4.5"], r"[0-9.]+") == 4.5


def test_results_are_best_first_then_the_unscored_by_index() -> None:
    rows = [
        TrialResult(0, {}, "SUCCEEDED", metric=0.5),
        TrialResult(1, {}, "FAILED"),
        TrialResult(2, {}, "SUCCEEDED", metric=0.1),
        TrialResult(3, {}, "SUCCEEDED", metric=0.9),
    ]
    assert [r.index for r in rank_results(rows, "minimize")] == [2, 0, 3, 1]
    assert [r.index for r in rank_results(rows, "maximize")] == [3, 0, 2, 1]


def test_local_default_parallel_is_what_the_cpus_hold() -> None:
    assert default_parallel("local", job(), 10, cpus=8) == 8
    assert default_parallel("local", job(resources={"hosts": 2, "devices_per_host": 2}), 10, cpus=8) == 2
    assert default_parallel("local", job(resources={"hosts": 4, "devices_per_host": 4}), 10, cpus=8) == 1
    assert default_parallel("modelarts", job(), 10, cpus=1) == 10


def test_a_missing_or_damaged_record_is_one_clear_error(tmp_path: Path) -> None:
    paths = SweepPaths(str(tmp_path), "s-1")
    with pytest.raises(SweepNotFound, match="no sweep with id 's-1'"):
        read_record(paths)
    Path(paths.folder).mkdir(parents=True)
    for text in (
        "{not json",
        "[]",
        json.dumps({"id": "s-1"}),
        json.dumps({"id": "s-1", "backend": "local", "created_at": 1, "max_parallel": 1, "trials": [{}]}),
    ):
        Path(paths.record).write_text(text)
        with pytest.raises(BackendError) as caught:
            read_record(paths)
        assert "is damaged" in str(caught.value) and paths.record in str(caught.value)


def test_the_schema_has_the_sweep_section() -> None:
    schema = json.loads((REPO / "templates" / "job.schema.json").read_text())
    assert set(schema["properties"]["sweep"]["properties"]) == set(SWEEP_FIELDS) == set(JOB_FIELDS["sweep"])
    data = {
        **JOB,
        "sweep": {
            "params": {"lr": [0.1], "wd": {"log_uniform": [1e-5, 1e-2]}},
            "random": 4,
            "metric": {"name": "loss", "regex": "loss=(.*)", "goal": "minimize"},
        },
    }
    jsonschema.validate(data, schema, cls=jsonschema.Draft202012Validator)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**JOB, "sweep": {"params": {"lr": {"normal": [0, 1]}}}}, schema)


def cli_run(args: List[str], home: Path) -> Result:
    return CliRunner().invoke(cli, args, env={"MALAUNCH_HOME": str(home)}, catch_exceptions=False)


@pytest.mark.parametrize("verb", ["run", "status", "wait", "stop", "logs", "list"])
def test_every_sweep_verb_has_help(verb: str, tmp_path: Path) -> None:
    result = cli_run(["sweep", verb, "--help"], tmp_path)
    assert result.exit_code == 0 and "Usage:" in result.output


def test_cli_errors_are_one_line_and_dry_run_starts_nothing(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("print(1)\n")
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**JOB, "code_dir": ".", "args": ["--lr", "{lr}"], "env": {}}))
    home = tmp_path / "home"
    unused = cli_run(["sweep", str(path), "--param", "lr=0.1,0.2", "--param", "wd=1,2"], home)
    assert unused.exit_code == 2
    assert unused.stderr.strip().splitlines() == [
        f"ma-submit: error: {path}: sweep.params.wd: is used by no {{wd}} placeholder in args or env, got 'wd'; "
        "put {wd} into args or an env value, or remove the parameter"
    ]
    assert cli_run(["sweep", "status", "nope"], home).exit_code == 4
    bare = cli_run(["sweep", str(path)], home)
    assert bare.exit_code == 2 and "sweep.params: is empty: no sweep: section with params and no --param" in bare.stderr
    dry = cli_run(["sweep", "--dry-run", str(path), "--param", "lr=0.1,0.2"], home)
    assert dry.exit_code == 0, dry.stderr
    assert "=== trial 0: lr=0.1" in dry.stdout and "=== trial 1: lr=0.2" in dry.stdout
    assert "MALAUNCH_TRIAL_INDEX=1" in dry.stdout
    assert not (home / "jobs").exists() and not (home / "sweeps").exists()


def test_a_damaged_record_is_one_line_from_the_cli(tmp_path: Path) -> None:
    folder = tmp_path / "sweeps" / "demo-sweep-1"
    folder.mkdir(parents=True)
    (folder / "sweep.json").write_text('{"id": "demo-sweep-1", "trials": ')
    result = cli_run(["sweep", "status", "demo-sweep"], tmp_path)
    assert result.exit_code == 3
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("ma-submit: error: sweep demo-sweep-1: its record ") and "is damaged (not JSON" in line
    listed = cli_run(["sweep", "list"], tmp_path)
    assert listed.exit_code == 0 and listed.stdout.startswith("error: demo-sweep-1: sweep demo-sweep-1: its record")


def test_a_trial_stuck_in_unknown_is_settled_after_a_while_so_nothing_waits_forever() -> None:
    now = time.time()
    trial = {"index": 0, "state": "UNKNOWN", "job_id": "j", "params": {}, "spec": {}}
    assert not is_done({"trials": [{**trial, "unknown_since": now - 1}]})
    assert is_done({"trials": [{**trial, "unknown_since": now - UNKNOWN_GIVE_UP - 1}]})
    assert is_done({"trials": [{**trial, "state": "SKIPPED"}, {**trial, "state": "STOPPED"}]})
    assert not is_done({"trials": [{**trial, "state": "WAITING", "job_id": None}]})
