"""The environment-contract table (entrypoint/contract/__init__.py): complete, equal to the docs, drifts fixed.

Drifts of issue 18 that fail on main before the table: ``MA_MAX_RESTARTS`` took full-width digits, ``1_0`` and
``+3`` (``int()``) where cluster_env refuses them; an invalid ``MS_ENABLE_RECOVERY`` was read as false under msrun;
the SDK's spec refused ``msrun_cluster_time_out: -1`` which the shim and docs allow (that one is in
tests/sdk/spec/test_spec_contract.py).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from typing import Dict, List, Set

import malaunch.entrypoint
import pytest
from malaunch.entrypoint import contract
from malaunch.entrypoint.contract.cluster_env import parse_cluster_env
from malaunch.entrypoint.contract.config import parse_restart_policy, parse_shim_config
from malaunch.entrypoint.contract.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "entrypoint.md").read_text()
ROWS = list(contract.VARIABLES.values())


# ---- the three drifts, through the table


@pytest.mark.parametrize("raw", ["\uff11", "\u0661", "1_0", "+3", "1e2", "0x1", "1234567890"])
def test_max_restarts_refuses_what_cluster_env_refuses(raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_restart_policy({"MA_MAX_RESTARTS": raw})
    assert str(caught.value).startswith("MA_MAX_RESTARTS=")
    assert "expected a whole number between 0 and 1000, in ASCII digits (0-9)" in str(caught.value)


@pytest.mark.parametrize(("raw", "value"), [("", 0), (" 3 ", 3), ("0", 0), ("1000", 1000)])
def test_max_restarts_still_reads_plain_numbers(raw: str, value: int) -> None:
    assert parse_restart_policy({"MA_MAX_RESTARTS": raw}).max_restarts == value


@pytest.mark.parametrize("raw", ["1001", "-1"])
def test_max_restarts_out_of_bounds_keeps_its_message(raw: str) -> None:
    with pytest.raises(ConfigError, match=r"expected a whole number between 0 and 1000$"):
        parse_restart_policy({"MA_MAX_RESTARTS": raw})


@pytest.mark.parametrize("raw", ["maybe", "2", "enabled", "tru"])
def test_invalid_ms_enable_recovery_under_msrun_exits_2_instead_of_meaning_false(raw: str) -> None:
    with pytest.raises(ConfigError, match=r"MS_ENABLE_RECOVERY=.*expected True or False"):
        parse_shim_config({"MA_RUN_METHOD": "msrun", "MS_ENABLE_RECOVERY": raw})


@pytest.mark.parametrize(
    ("raw", "wanted"), [("1", True), ("TRUE", True), ("on", True), ("yes", True), ("0", False), ("off", False),
                        ("False", False), ("", False), (" ", False)],
)  # fmt: skip
def test_ms_enable_recovery_values(raw: str, wanted: bool) -> None:
    assert parse_shim_config({"MA_RUN_METHOD": "msrun", "MS_ENABLE_RECOVERY": raw}).recovery.enabled is wanted


def test_ms_enable_recovery_is_not_read_without_msrun() -> None:
    assert parse_shim_config({"MA_RUN_METHOD": "torchrun", "MS_ENABLE_RECOVERY": "maybe"}).recovery.enabled is False


# ---- the parse helpers give cluster_env's values and errors

#: variable -> the ClusterEnv field cluster_env parses it into
PARSED_BY_CLUSTER_ENV = {
    "MA_NUM_HOSTS": "num_hosts", "MA_NUM_GPUS": "devices_per_host", "MA_TORCHRUN_MASTER_PORT": "torchrun_master_port",
    "MA_MSRUN_MASTER_PORT": "msrun_master_port", "MSRUN_CLUSTER_TIME_OUT": "msrun_cluster_time_out",
    "MS_RANKTABLE_ENABLE": "msrun_rank_table", "MALAUNCH_MASTER_PORT": "ranktable_master_port",
    "MALAUNCH_GRACE_PERIOD": "grace_period", "MALAUNCH_RANK_TABLE_TIMEOUT": "rank_table_timeout",
    "MALAUNCH_MASTER_WAIT": "master_wait",
}  # fmt: skip
SAMPLES = ["", " ", "0", "1", " 7 ", "-1", "-2", "2.5", ".5", "5.", "1024", "1025", "16384", "16385", "65535",
           "65536", "999999999", "1234567890", "\uff12", "\u0663", "1_0", "+3", "1e3", "nan", "inf", "abc", "True",
           "false", "yes", "OFF", "maybe", "-0", "- 1"]  # fmt: skip


def _contract_parse(name: str, environ: Dict[str, str]) -> object:
    kind = contract.VARIABLES[name].kind
    if kind == "bool":
        return contract.parse_bool(environ, name)
    if kind == "seconds":
        return contract.parse_seconds(environ, name)
    return contract.parse_int(environ, name)


@pytest.mark.parametrize("name", sorted(PARSED_BY_CLUSTER_ENV))
def test_parse_helpers_match_cluster_env(name: str) -> None:
    for raw in SAMPLES:
        environ = {name: raw}
        try:
            expected: object = getattr(parse_cluster_env(environ), PARSED_BY_CLUSTER_ENV[name])
        except ConfigError as error:
            expected = f"error: {error}"
        try:
            got = _contract_parse(name, environ)
        except ConfigError as error:
            got = f"error: {error}"
        assert got == expected, (name, raw)


def test_helpers_refuse_a_variable_of_another_kind() -> None:
    with pytest.raises(TypeError):
        contract.parse_int({}, "MS_RANKTABLE_ENABLE")
    with pytest.raises(KeyError):
        contract.parse_bool({}, "NOT_IN_THE_CONTRACT")
    assert contract.int_bounds("MSRUN_CLUSTER_TIME_OUT") == (-1, None)
    assert contract.int_bounds("MA_NUM_HOSTS") == (1, 16384)
    assert contract.seconds_default("MALAUNCH_GRACE_PERIOD") == 30.0
    with pytest.raises(TypeError):
        contract.seconds_default("MA_NUM_HOSTS")  # a whole number, not seconds


# ---- the table itself


def test_rows_are_well_formed() -> None:
    names: Set[str] = set()
    for row in ROWS:
        assert row.kind in contract.KINDS and row.role in contract.ROLES, row
        assert row.set_by and set(row.set_by) <= set(contract.SETTERS), row
        assert row.meaning, row
        for alias in (row.name, *row.aliases):
            assert alias not in names, f"{alias} twice"
            names.add(alias)
        if row.minimum is not None and row.maximum is not None:
            assert row.minimum <= row.maximum, row
        if isinstance(row.default, (int, float)) and not isinstance(row.default, bool):
            assert row.minimum is None or row.default >= row.minimum, row
            assert row.maximum is None or row.default <= row.maximum, row
        assert ("shim" in row.set_by) == row.sets, row
    with pytest.raises(AttributeError):
        ROWS[0].name = "X"  # type: ignore[misc]


def _module_constants() -> Set[str]:
    names: Set[str] = set()
    for info in pkgutil.walk_packages(malaunch.entrypoint.__path__, prefix="malaunch.entrypoint."):
        names |= set(vars(importlib.import_module(info.name)))
    return names


def test_every_variable_named_in_the_shim_is_in_the_table() -> None:
    literals: Set[str] = set()
    for path in (ROOT / "entrypoint").rglob("*.py"):
        literals |= set(re.findall(r"""["']([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)["']""", path.read_text()))
    # an argument, MS_ROLE values, os names
    not_variables = {"BOOT_FILE", "MS_SCHED", "MS_WORKER", "O_CLOEXEC", "SC_CLK_TCK", "SC_PAGE_SIZE"}
    # torchrun's own, to its workers (no part of the contract): the checkpoint helper tells a worker of a torchrun
    # that restarts by itself from a fan-out rank by it
    launchers_own = {"TORCHELASTIC_RUN_ID"}
    named = literals - _module_constants() - not_variables - launchers_own
    known = {alias for row in ROWS for alias in (row.name, *row.aliases)}
    assert len(named) > 40
    assert named - known == set()


# ---- docs/entrypoint.md agrees with the table


def _doc_rows(section_start: str, section_end: str) -> Dict[str, List[str]]:
    """Variable -> its row's cells, for every variable named in a row's first cell."""
    table = DOC[DOC.index(section_start) : DOC.index(section_end)]
    rows: Dict[str, List[str]] = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.split("|")[1:-1]]
        if line.startswith("| `") and len(cells) >= 5:
            for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0]):
                rows[name] = cells
    return rows


INPUTS = _doc_rows("**Inputs**", "**Outputs**")


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def test_the_docs_inputs_table_names_exactly_the_variables_the_shim_reads() -> None:
    read = {alias for row in ROWS if row.reads for alias in (row.name, *row.aliases)}
    assert set(INPUTS) == read


@pytest.mark.parametrize("row", [row for row in ROWS if row.reads], ids=lambda row: row.name)
def test_the_docs_row_shows_the_tables_default_bounds_choices_and_field(row: contract.Variable) -> None:
    _, _, default, rule, sdk = INPUTS[row.name][:5]
    if row.default is not None:
        assert f"`{_shown(row.default)}`" in default, (row.name, default)
    for bound in (row.minimum, row.maximum):
        if bound is not None:
            assert re.search(rf"(?<![\d-]){re.escape(_shown(bound))}(?!\d)", rule), (row.name, bound, rule)
    for choice in row.choices:
        assert choice in rule, (row.name, choice)
    if row.sdk_field:
        assert f"`{row.sdk_field}`" in sdk, (row.name, sdk)
    for alias in row.aliases:
        assert f"alias of `{row.name}`" in INPUTS[alias][1]


def test_every_variable_the_shim_sets_is_in_the_docs_outputs() -> None:
    outputs = DOC[DOC.index("**Outputs**") : DOC.index("## Launch methods")]
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)(?:=[^`]*)?`", outputs))
    assert {row.name for row in ROWS if row.sets} - documented == set()
