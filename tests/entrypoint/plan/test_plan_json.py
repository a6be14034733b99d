"""One plan JSON round trip (issue 18): ``LaunchPlan.from_json(plan.to_json()) == plan`` keeping every field.

Fails on main: the reader was ``ms_recovery.plan_from_json``, which dropped ``env_defaults`` and ``restart_on``
(a recovery unit ran its process without the variables the plan set only where the environment lacked them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from malaunch.entrypoint.contract.prepare_steps import PrepareSteps
from malaunch.entrypoint.plan.launch_plan import LOG_SOURCES, METHODS, LaunchPlan, ProcessSpec

GOLDEN = Path(__file__).parents[1] / "golden" / "expected"
_text = st.text(max_size=12)
_names = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789", min_size=1, max_size=10)
_env = st.dictionaries(_names, _text, max_size=4)
_rank = st.none() | st.integers(min_value=0, max_value=32767)

processes = st.builds(
    ProcessSpec, name=_text, argv=st.lists(_text, max_size=4).map(tuple), env=_env, cwd=st.none() | _text,
    log_file=_text, rank=_rank, local_rank=_rank, env_defaults=_env,
)  # fmt: skip
plans = st.builds(
    LaunchPlan,
    method=st.sampled_from(METHODS),
    node_rank=st.integers(min_value=0, max_value=16383),
    num_hosts=st.integers(min_value=1, max_value=16384),
    host=_text,
    processes=st.lists(processes, max_size=4).map(tuple),
    log_source=st.sampled_from(LOG_SOURCES),
    log_dir=_text,
    rank_logs=st.dictionaries(st.integers(min_value=-1, max_value=32767), _text, max_size=4),
    grace_period=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    report_file=_text,
    notes=st.lists(_text, max_size=3).map(tuple),
    files=st.dictionaries(_text, _text, max_size=3),
    watch_workers=st.booleans(),
    restart_on=st.none() | st.sampled_from(["retryable", "always", "never"])
    | st.lists(st.integers(min_value=1, max_value=255), min_size=1, max_size=4).map(tuple),
    # a prepare step is an argv of at least one word (MALAUNCH_PREPARE refuses an empty one)
    prepare=st.none() | st.builds(PrepareSteps, st.lists(st.lists(_text, min_size=1, max_size=3).map(tuple),
                                                         min_size=1, max_size=3).map(tuple),
                                  st.floats(min_value=1, max_value=86400, allow_nan=False)),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(plans)
def test_every_plan_survives_its_json_through_a_file(plan: LaunchPlan) -> None:
    again = LaunchPlan.from_json(json.loads(json.dumps(plan.to_json())))
    assert again == plan
    assert again.to_json() == plan.to_json()
    for field in LaunchPlan._fields:
        assert getattr(again, field) == getattr(plan, field), field


def test_env_defaults_and_restart_on_are_kept() -> None:
    proc = ProcessSpec("torchrun", ("python",), {"A": "1"}, None, "/l/t.log", env_defaults={"PYTHONUNBUFFERED": "1"})
    plan = LaunchPlan("torchrun", 0, 1, "h", (proc,), "attempt_files", "/l", {0: "/l/0.log"}, 3.0, "/l/r.json",
                      watch_workers=True, restart_on=(3, 7))  # fmt: skip
    again = LaunchPlan.from_json(plan.to_json())
    assert again.processes[0].env_defaults == {"PYTHONUNBUFFERED": "1"}
    assert again.restart_on == (3, 7) and again.watch_workers is True


def _dry_plans() -> Dict[str, Dict[str, Any]]:
    found = {}
    for path in sorted(GOLDEN.glob("dry-*.json")):
        case = json.loads(path.read_text())
        if case["exit_code"] == 0:
            found[path.stem] = json.loads("\n".join(case["stdout"]))
    return found


@pytest.mark.parametrize(("name", "data"), sorted(_dry_plans().items()))
def test_every_printed_dry_run_plan_reads_back_to_the_same_json(name: str, data: Dict[str, Any]) -> None:
    assert LaunchPlan.from_json(data).to_json() == data, name


@pytest.mark.parametrize(
    ("field", "value"),
    [("method", "mpirun"), ("log_source", "tty"), ("processes", None), ("rank_logs", {"x": "/l"}),
     ("grace_period", "3"), ("watch_workers", "yes"), ("restart_on", 3), ("node_rank", True), ("notes", "n")],
)  # fmt: skip
def test_a_damaged_plan_is_a_clear_value_error(field: str, value: object) -> None:
    proc = ProcessSpec("p", ("python",), {}, None, "/l/p.log")
    data = LaunchPlan("single", 0, 1, "h", (proc,), "pipe", "/l", {0: "/l/0.log"}, 3.0, "/l/r.json").to_json()
    data[field] = value
    with pytest.raises(ValueError, match=field if field not in ("method", "log_source") else "unknown"):
        LaunchPlan.from_json(data)
