"""The SDK's shape (issue 27): each fact in one home, folders that show the flow, backends known only to the registry.

Read from the source with ``ast``, so each rule fails on the line that breaks it: no module outside
``sdk/backends/`` compares a backend's name or imports a backend's folder; ``MALAUNCH_HOME`` is read in one module;
the local job folder's file names are spelled in one module; no folder holds three or more modules whose names
share a prefix (such a family wants a folder); the helpers one CLI module takes from another are public.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest
from layoututil import prefix_families
from malaunch.entrypoint.public import int_bounds
from malaunch.sdk.backends import BACKEND_NAMES
from malaunch.sdk.home import DEFAULT_HOME, HOME_VARIABLE

pytestmark = pytest.mark.slow  # each reads and parses every module

SDK = Path(__file__).resolve().parents[3] / "sdk"
BACKENDS = SDK / "backends"
PACKAGE = "malaunch.sdk"


def _modules() -> Iterator[Tuple[str, ast.AST]]:
    for path in sorted(SDK.rglob("*.py")):
        yield path.relative_to(SDK).as_posix(), ast.parse(path.read_text())


def _outside_backends() -> Iterator[Tuple[str, ast.AST]]:
    return ((name, tree) for name, tree in _modules() if not name.startswith("backends/"))


def _strings(tree: ast.AST) -> Iterator[Tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def _imported(name: str, tree: ast.AST) -> Iterator[Tuple[int, str]]:
    """(line, absolute module) of every import in module ``name`` (relative ones resolved)."""
    here = ["malaunch", "sdk", *name[: -len(".py")].split("/")]
    package = here[:-1]  # a module's package; for __init__.py the package itself
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            yield node.lineno, module
            yield from ((node.lineno, f"{module}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)


def test_no_backend_name_is_compared_outside_the_backends() -> None:
    found: List[str] = []
    for name, tree in _outside_backends():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                values = [node.left, *node.comparators]
                for value in values:
                    if isinstance(value, ast.Constant) and value.value in BACKEND_NAMES:
                        found.append(f"{name}:{node.lineno} compares {value.value!r}")
                    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
                        named = [e.value for e in value.elts if isinstance(e, ast.Constant)]
                        named = [item for item in named if item in BACKEND_NAMES]
                        found.extend(f"{name}:{node.lineno} compares {item!r}" for item in named)
    assert found == [], "ask the registry (malaunch.sdk.backends) what a backend does instead"


def test_no_backend_folder_is_imported_outside_the_backends() -> None:
    folders = tuple(f"{PACKAGE}.backends.{backend}" for backend in BACKEND_NAMES)
    found = [
        f"{name}:{line} imports {module}"
        for name, tree in _outside_backends()
        for line, module in _imported(name, tree)
        if module.startswith(folders)
    ]
    assert found == [], "only the registry and the backends' own folders know a backend's modules"


def test_the_loader_reads_each_backend_section_as_the_backend_declares_it() -> None:
    from malaunch.sdk.backends import option_sections
    from malaunch.sdk.spec.loader import JOB_FIELDS

    named = sorted(
        f"{line} {text!r}" for line, text in _strings(ast.parse((SDK / "spec" / "loader.py").read_text()))
        if text in BACKEND_NAMES
    )  # fmt: skip
    assert named == [], "the loader takes the backends' sections from the registry"
    sections = option_sections()
    assert {section.name for section in sections} == {"volcano", "modelarts"}
    for section in sections:
        assert JOB_FIELDS[section.name] == section.keys
        assert section.name in JOB_FIELDS[""]


def test_the_registry_is_the_one_list_of_backends() -> None:
    spelled = Counter(
        name
        for module, tree in _modules()
        for _, text in _strings(tree)
        for name in BACKEND_NAMES
        if text == f"{PACKAGE}.backends.{name}"
    )
    assert spelled == Counter(BACKEND_NAMES), "the module of each backend is named once, in backends/registry.py"


def test_the_home_is_read_in_one_module() -> None:
    homes = sorted(
        name for name, tree in _modules() for _, text in _strings(tree) if text in (HOME_VARIABLE, ".malaunch")
    )
    assert homes == ["home.py", "home.py"], homes
    assert DEFAULT_HOME.endswith(".malaunch")


def test_the_local_job_folder_layout_is_spelled_in_one_module() -> None:
    files = {"console.log", "report.json", "plan.json", "state.json", "runner.pid", "runner.log"}
    found = sorted(
        f"{name}:{line} {text!r}"
        for name, tree in _modules()
        for line, text in _strings(tree)
        if text in files and name != "backends/local/jobdir.py"
    )
    assert found == [], "a path in a local job's folder comes from JobPaths (backends/local/jobdir.py)"


def test_no_folder_holds_a_prefix_family_of_three_modules() -> None:
    assert prefix_families(SDK) == [], "a family of modules wants a folder"


def test_modules_take_only_public_names_from_each_other() -> None:
    private = [
        f"{name}:{line} imports {module}"
        for name, tree in _modules()
        for line, module in _imported(name, tree)
        if module.startswith(f"{PACKAGE}.") and module.rsplit(".", 1)[-1].startswith("_")
        and not module.endswith(("._http", ".__future__"))  # _http: a private module of the backends, by its name
    ]
    assert private == [], "share a helper by making it public where it lives"


def test_the_hosts_limit_is_the_contracts() -> None:
    import json

    from malaunch.sdk import Resources, SpecError

    low, high = int_bounds("MA_NUM_HOSTS")
    assert high is not None
    Resources(hosts=high)
    for bad in (low - 1, high + 1):
        try:
            Resources(hosts=bad)
        except SpecError as error:
            assert error.field == "resources.hosts"
        else:
            raise AssertionError(f"hosts={bad} was taken")
    schema = json.loads((SDK / "job.schema.json").read_text())
    hosts = schema["properties"]["resources"]["properties"]["hosts"]
    assert (hosts["minimum"], hosts["maximum"]) == (low, high)
