"""The environment is read in one place (issue 27): the shim's start (``start.py``) reads ``os.environ`` once,
``contract/`` parses it once into one frozen :class:`ShimConfig`, and every other module receives that.

Read from the source with ``ast``, so each rule fails on the line that breaks it: outside ``contract/`` no module
calls or imports a parse helper of the contract, only ``start.py`` calls :func:`parse_shim_config`, and only
``start.py`` touches ``os.environ`` (once). The ranks' environment is the mapping itself, passed on as data.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest
from malaunch.entrypoint.contract.config import (
    CoordinatorSettings,
    MsRecovery,
    RestartPolicy,
    ShimConfig,
    parse_coordinator,
    parse_shim_config,
)
from malaunch.entrypoint.contract.errors import ConfigError

SHIM = Path(__file__).resolve().parents[3] / "entrypoint"
#: The contract's parsers: a module outside ``contract/`` that names one re-reads a variable.
PARSERS = frozenset({
    "parse_bool", "parse_choice", "parse_codes", "parse_int", "parse_seconds", "parse_words", "raw_value",
    "parse_cluster_env", "parse_restart_policy", "parse_coordinator",
})  # fmt: skip
ENTRY = "parse_shim_config"
#: The package's root: it names where each public name lives, it parses nothing.
PUBLIC_NAMES = "__init__.py"
#: What reads the process's own environment.
OS_READERS = frozenset({"environ", "environb", "getenv", "getenvb"})


#: Modules of the package that run in the ranks, not in the shim: they read the environment the shim gave them.
RANK_SIDE = ("checkpoint.py",)
#: Programs of their own that the shim starts: each reads its own process's environment (the webhook program, the
#: secret that signs its body: the shim hands it the variable's name, never the value on a command line).
OWN_PROGRAMS = ("run/webhook.py",)


def _modules() -> Iterator[Tuple[str, ast.AST]]:
    for path in sorted(SHIM.rglob("*.py")):
        if path.relative_to(SHIM).as_posix() not in RANK_SIDE + OWN_PROGRAMS:
            yield path.relative_to(SHIM).as_posix(), ast.parse(path.read_text())


def _names(tree: ast.AST) -> Iterator[Tuple[int, str]]:
    """(line, name) of every name the module uses or imports (``x``, ``m.x``, ``from m import x``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, ast.ImportFrom):
            yield from ((node.lineno, alias.name) for alias in node.names)


def _os_reads(tree: ast.AST) -> Iterator[int]:
    """Lines that read the process's environment: ``os.environ``, ``os.getenv``, ``from os import environ``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in OS_READERS:
            if isinstance(node.value, ast.Name) and node.value.id == "os":
                yield node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            yield from (node.lineno for alias in node.names if alias.name in OS_READERS)


def _parses_outside_the_contract(modules: Iterator[Tuple[str, ast.AST]]) -> List[str]:
    found = []
    for name, tree in modules:
        if name.startswith("contract/") or name == PUBLIC_NAMES:
            continue
        for line, used in _names(tree):
            if used in PARSERS or (used == ENTRY and name != "start.py"):
                found.append(f"{name}:{line} {used}")
    return found


def _environment_reads(modules: Iterator[Tuple[str, ast.AST]]) -> Dict[str, List[int]]:
    return {name: lines for name, tree in modules if (lines := list(_os_reads(tree)))}


@pytest.mark.slow
def test_only_the_contract_parses_a_variable() -> None:
    assert _parses_outside_the_contract(_modules()) == [], (
        "read the value from the ShimConfig main hands on (contract/config.py), not from the environment"
    )


@pytest.mark.slow
def test_main_reads_the_process_environment_once_and_nothing_else_does() -> None:
    assert _environment_reads(_modules()) == {"start.py": [_only_read_line()]}


def _only_read_line() -> int:
    lines = list(_os_reads(ast.parse((SHIM / "start.py").read_text())))
    assert len(lines) == 1, lines
    return lines[0]


def test_the_checks_see_every_form(tmp_path: Path) -> None:
    sample = ast.parse(
        "import os\n"
        "from os import environ\n"
        "from ..contract import parse_int\n"
        "def f(env):\n"
        "    contract.parse_seconds(env, 'X')\n"
        "    return os.environ.get('Y'), os.getenv('Z'), parse_shim_config(env)\n"
    )
    found = _parses_outside_the_contract(iter([("run/x.py", sample), ("contract/y.py", sample)]))
    assert found == ["run/x.py:3 parse_int", "run/x.py:5 parse_seconds", "run/x.py:6 parse_shim_config"]
    assert _environment_reads(iter([("run/x.py", sample)])) == {"run/x.py": [2, 6, 6]}
    assert _parses_outside_the_contract(iter([("start.py", ast.parse("parse_shim_config(os.environ)"))])) == []


def test_the_config_holds_every_part_and_is_frozen() -> None:
    env = {
        "MA_RUN_METHOD": "msrun", "MA_NUM_HOSTS": "2", "VC_WORKER_HOSTS": "a,b", "MS_ENABLE_RECOVERY": "on",
        "MS_RECOVERY_PATH": " /ckpt/rec ", "MALAUNCH_MS_RECOVERY_DELAY": "7", "MA_MAX_RESTARTS": "2",
        "MALAUNCH_RESTART_ON": "1,137", "MALAUNCH_HANG_TIMEOUT": "90", "MALAUNCH_COORDINATOR_PORT": "29400",
        "MALAUNCH_JOB_SECRET": "s3cret-value", "PATH": "/opt/bin:/usr/bin",
    }  # fmt: skip
    config = parse_shim_config(env)
    assert config.cluster.num_hosts == 2 and config.cluster.master_addr == "a"
    assert config.policy == RestartPolicy(2, (1, 137), 1.0)
    assert config.hang_timeout == 90.0 and config.path == "/opt/bin:/usr/bin"
    assert config.recovery == MsRecovery(True, 7.0, "/ckpt/rec")
    assert config.coordinator is not None and config.coordinator.port == 29400
    assert config.coordinator.secret == "s3cret-value" and "s3cret" not in repr(config)
    assert parse_shim_config(env) == config  # a pure function of the mapping
    with pytest.raises(AttributeError, match="frozen"):
        config.hang_timeout = 1.0  # type: ignore[misc]
    with pytest.raises(AttributeError, match="frozen"):
        config.recovery.enabled = False  # type: ignore[misc]


def test_one_host_reads_no_coordinator_variable_and_other_methods_no_recovery() -> None:
    config = parse_shim_config({"MALAUNCH_COORDINATOR_PORT": "not-a-port", "MS_ENABLE_RECOVERY": "maybe"})
    assert config.coordinator is None and not config.recovery.enabled
    assert isinstance(config, ShimConfig)
    assert parse_coordinator({}) == CoordinatorSettings(True, 29510, 20.0, 120.0, None)  # the contract table's defaults


@pytest.mark.parametrize(
    ("env", "first"),
    [
        ({"MA_NUM_HOSTS": "x", "MA_MAX_RESTARTS": "x"}, "MA_NUM_HOSTS"),
        ({"MA_MAX_RESTARTS": "x", "MALAUNCH_MS_RECOVERY_DELAY": "x"}, "MA_MAX_RESTARTS"),
        ({"MALAUNCH_RESTART_BACKOFF": "x", "MALAUNCH_MS_RECOVERY_DELAY": "x"}, "MALAUNCH_RESTART_BACKOFF"),
        ({"MALAUNCH_MS_RECOVERY_DELAY": "x", "MALAUNCH_HANG_TIMEOUT": "x"}, "MALAUNCH_MS_RECOVERY_DELAY"),
        ({"MALAUNCH_HANG_TIMEOUT": "x", "MA_RUN_METHOD": "msrun", "MS_ENABLE_RECOVERY": "x"}, "MALAUNCH_HANG_TIMEOUT"),
        ({"MA_RUN_METHOD": "msrun", "MS_ENABLE_RECOVERY": "x", "MA_NUM_HOSTS": "2", "VC_WORKER_HOSTS": "a,b",
          "MALAUNCH_COORDINATOR_PORT": "x"}, "MS_ENABLE_RECOVERY"),
    ],
)
def test_the_first_invalid_variable_is_named_in_the_order_the_shim_always_read_them(
    env: Dict[str, str], first: str
) -> None:
    with pytest.raises(ConfigError, match=f"^{first}="):
        parse_shim_config(env)


def _dry_run(tmp_path: Path, env: Dict[str, str]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "train.py").write_text("print('hi')\n")
    base = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    return subprocess.run([sys.executable, "-m", "malaunch.entrypoint", "--dry-run", "train.py"], cwd=tmp_path,
                          env={**base, **env}, capture_output=True, text=True, timeout=60)  # fmt: skip


def test_a_dry_run_refuses_a_coordinator_setting_the_real_run_would_refuse(tmp_path: Path) -> None:
    hosts = {"MA_NUM_HOSTS": "2", "VC_WORKER_HOSTS": "a,b"}
    done = _dry_run(tmp_path, {**hosts, "MALAUNCH_COORDINATOR_PORT": "abc"})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "ma-entrypoint: error: MALAUNCH_COORDINATOR_PORT='abc' is invalid: expected a whole number between 1 and "
        "65535, in ASCII digits (0-9)"
    ]
    single = _dry_run(tmp_path, {"MALAUNCH_COORDINATOR_PORT": "abc"})  # one host: the coordinator is not read
    assert single.returncode == 0 and '"num_hosts": 1' in single.stdout
