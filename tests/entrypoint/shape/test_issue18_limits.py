"""Issue 18's limits on the shim's shape.

The limits (issue 18, "Limits, checked by tests"): in ``entrypoint/`` no module over 400 lines, no class over
200 lines, no function over 60 statements, no folder with a prefix family of three or more modules (issue 27:
such a family is a package, as ``launchers/torchrun/``), and no method-name literal (``"torchrun"``, ``"msrun"``,
``"ranktable"``) outside the launcher modules and the contract (its table, and the configuration that reads
MindSpore recovery under msrun only). The ``*_EXCEPTIONS`` tables list, as data, what
may break a limit; the redesign emptied them. A listed exception that holds its limit is refused too, so the
lists can only shrink.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

import pytest
from layoututil import prefix_families

pytestmark = pytest.mark.slow  # each reads and parses every module

SHIM = Path(__file__).resolve().parents[3] / "entrypoint"
ISSUE = 18
MAX_MODULE_LINES = 400
MAX_CLASS_LINES = 200
MAX_FUNCTION_STATEMENTS = 60
METHOD_NAMES = ("torchrun", "msrun", "ranktable")
#: Modules that may name a method: the launchers (one package or module per method, and their registry) and the
#: contract (its table, and the configuration parsed from it).
LAUNCHER_FOLDER = "launchers/"
CONTRACT_TABLE = "contract/variables.py"
CONTRACT_CONFIG = "contract/config.py"

#: module -> issue that must bring it to 400 lines or fewer (issue 18 emptied every table below; keep them empty).
MODULE_EXCEPTIONS: Dict[str, int] = {}
#: "module:Class" -> issue.
CLASS_EXCEPTIONS: Dict[str, int] = {}
#: "module:function" -> issue.
FUNCTION_EXCEPTIONS: Dict[str, int] = {}
#: module -> issue: modules outside the launchers that still branch on a method name.
METHOD_LITERAL_EXCEPTIONS: Dict[str, int] = {}


def _may_name_methods(module: str) -> bool:
    return module.startswith(LAUNCHER_FOLDER) or module in (CONTRACT_TABLE, CONTRACT_CONFIG)


def _modules() -> Iterator[Tuple[str, str, ast.Module]]:
    for path in sorted(SHIM.rglob("*.py")):
        text = path.read_text()
        yield path.relative_to(SHIM).as_posix(), text, ast.parse(text)


def _module_lines() -> Dict[str, int]:
    return {name: len(text.splitlines()) for name, text, _ in _modules()}


def _class_lines() -> Dict[str, int]:
    found: Dict[str, int] = {}
    for name, _, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                found[f"{name}:{node.name}"] = (node.end_lineno or node.lineno) - node.lineno + 1
    return found


def _function_statements() -> Dict[str, int]:
    found: Dict[str, int] = {}
    for name, _, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                count = sum(isinstance(inner, ast.stmt) for inner in ast.walk(node)) - 1  # not the def itself
                key = f"{name}:{node.name}"
                found[key] = max(count, found.get(key, 0))
    return found


def _method_literals() -> Dict[str, List[str]]:
    found: Dict[str, List[str]] = {}
    for name, _, tree in _modules():
        named = sorted({node.value for node in ast.walk(tree)
                        if isinstance(node, ast.Constant) and node.value in METHOD_NAMES})  # fmt: skip
        if named:
            found[name] = named
    return found


@pytest.mark.parametrize(
    ("measure", "limit", "exceptions", "what"),
    [
        (_module_lines, MAX_MODULE_LINES, MODULE_EXCEPTIONS, "lines"),
        (_class_lines, MAX_CLASS_LINES, CLASS_EXCEPTIONS, "lines"),
        (_function_statements, MAX_FUNCTION_STATEMENTS, FUNCTION_EXCEPTIONS, "statements"),
    ],
    ids=["modules", "classes", "functions"],
)
def test_size_limits_hold_outside_the_listed_exceptions(
    measure: Callable[[], Dict[str, int]], limit: int, exceptions: Dict[str, int], what: str
) -> None:
    sizes = measure()
    over = {name: size for name, size in sizes.items() if size > limit}
    assert {name: size for name, size in over.items() if name not in exceptions} == {}, (
        f"over {limit} {what} (issue {ISSUE}): split them, do not add them to the exceptions"
    )
    stale = sorted(name for name in exceptions if sizes.get(name, 0) <= limit)
    assert stale == [], f"these now hold the limit of {limit} {what}: remove them from the exceptions"


def test_method_names_are_named_only_by_the_launchers_and_the_contract() -> None:
    found = _method_literals()
    outside = {name: named for name, named in found.items() if not _may_name_methods(name)}
    assert {name: named for name, named in outside.items() if name not in METHOD_LITERAL_EXCEPTIONS} == {}, (
        f"a method name outside the launcher modules (issue {ISSUE}): give the launcher a hook instead"
    )
    stale = sorted(name for name in METHOD_LITERAL_EXCEPTIONS if name not in found)
    assert stale == [], "these no longer name a method: remove them from METHOD_LITERAL_EXCEPTIONS"


def test_no_folder_holds_a_prefix_family_of_three_modules() -> None:
    assert prefix_families(SHIM) == [], "a family of modules wants a folder (a package), as launchers/torchrun/"


def test_the_family_check_sees_a_family(tmp_path: Path) -> None:
    for name in ("torchrun.py", "torchrun_gate.py", "_torchrun_logs.py", "msrun.py", "msrun_recovery.py"):
        (tmp_path / "launchers" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "launchers" / name).write_text("")
    assert prefix_families(tmp_path) == ["launchers: ['_torchrun_logs', 'torchrun', 'torchrun_gate'] (2)"]


def test_the_measures_see_the_code() -> None:
    assert _module_lines()["run/supervisor.py"] > 100
    assert _class_lines()["run/supervisor.py:Supervisor"] > 100
    assert max(_function_statements().values()) > 20
    assert "torchrun" in _method_literals()["launchers/torchrun/plan.py"]
    assert "msrun" in _method_literals()["launchers/msrun/__init__.py"]
    assert {"ranktable", "torchrun", "msrun"} <= set(_method_literals()[CONTRACT_TABLE])
