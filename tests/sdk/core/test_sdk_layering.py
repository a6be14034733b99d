"""The SDK's layers (issue 41): imports only point down, and no module of the SDK is in an import circle.

Layers, lowest first (a module may import from its own layer or any layer below, never from one above):

0. **facts**: errors, units, secrets' masking, the home, job states, failure classes, the value checks, the
   registry (``backends/registry.py``: the backends' names and where each lives) and what it reads of each
   backend without loading it (``<backend>/options.py``, ``ids.py``, ``profile.py``), the profile file and
   what a profile key is (``profiles/store.py``, ``keys.py``: a backend reads its settings from the profile);
1. **spec**: ``spec/`` (the job file, its loader, the launcher table), ``plan.py``, the job file's ``notify:``
   section (``notify/targets.py``, ``fromdata.py``, ``check.py``, ``payload.py``: what every backend hands the shim);
2. **backends' shared parts**: the modules directly in ``backends/`` (``base.py``, the ``Backend`` interface);
3. **one backend**: each folder under ``backends/``; no backend imports another's folder;
4. **profiles and opening a backend**: ``profiles/``, ``opening.py`` (a backend by name, with a profile, or the
   one that owns a job id);
5. **the Python API**: ``job.py``, ``follow.py``, ``logview.py``, ``sweep/``, ``notify/``;
6. **the faces**: ``cli/``, ``ui/`` and the package's ``__init__.py``.

Every import counts: at the top, inside functions and under ``TYPE_CHECKING``. ``from .pkg import name`` counts
as an import of ``pkg.name`` when that is a module, else of ``pkg``; the package ``__init__`` a dotted import
runs on the way is not counted (the ones the SDK's modules name are thin: names imported on first use).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Mapping, Sequence, Set, Tuple

import malaunch.sdk.backends.local.backend as local_backend
from malaunch.sdk.backends.base import JobHandle

SDK = Path(__file__).resolve().parents[3] / "sdk"
PACKAGE = "malaunch.sdk"
LAYERS = ("facts", "spec", "backends' shared parts", "one backend", "profiles", "the Python API", "the faces")
#: Modules of the facts layer (dotted below the package); also each backend's own facts, ``_BACKEND_FACTS``.
_FACTS = frozenset({
    "errors", "units", "redact", "home", "status", "failures", "spec.checks", "spec.trials", "profiles.keys",
    "profiles.store",
    "backends", "backends.registry",
})  # fmt: skip
#: What the registry reads of a backend without loading it (and what those modules need of their own folder).
_BACKEND_FACTS = frozenset({"options", "ids", "profile", "variables"})
_SPEC = frozenset({"plan", "notify.targets", "notify.fromdata", "notify.check", "notify.payload"})
_PROFILES = frozenset({"opening"})
_API = frozenset({"job", "follow", "logview"})


def backend_folders(root: Path = SDK) -> Set[str]:
    """The folders under ``backends/`` (each one backend)."""
    return {path.parent.name for path in (root / "backends").glob("*/__init__.py")}


def layer_of(module: str, folders: Set[str]) -> int:
    """The layer of ``module`` (dotted below ``malaunch.sdk``; ``""`` is the package itself)."""
    parts = module.split(".")
    in_backend = parts[0] == "backends" and len(parts) > 2 and parts[1] in folders
    if module in _FACTS or (in_backend and len(parts) == 3 and parts[2] in _BACKEND_FACTS):
        return 0
    if parts[0] == "spec" or module in _SPEC:
        return 1
    if parts[0] == "backends":
        return 3 if len(parts) > 1 and parts[1] in folders else 2
    if parts[0] == "profiles" or module in _PROFILES:
        return 4
    if parts[0] in ("sweep", "notify") or module in _API:
        return 5
    return 6


def _module_names(root: Path) -> Dict[str, Path]:
    """Dotted name (below the package) -> file, for every module under ``root``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports_of(module: str, is_package: bool, source: str, known: Set[str]) -> Set[str]:
    """The SDK modules that ``source`` (module ``module``) imports, anywhere in it."""
    here = module.split(".") if module else []
    package = here if is_package else here[:-1]
    found: Set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = [*base, *(node.module.split(".") if node.module else [])]
            elif (node.module or "").startswith(PACKAGE + ".") or node.module == PACKAGE:
                target = (node.module or "").split(".")[2:]
            else:
                continue
            for alias in node.names:
                sub = ".".join([*target, alias.name])
                found.add(sub if sub in known else ".".join(target))
        elif isinstance(node, ast.Import):
            found.update(".".join(a.name.split(".")[2:]) for a in node.names if a.name.startswith(PACKAGE + "."))
    found.discard(module)
    return found


def import_graph(root: Path = SDK) -> Dict[str, Set[str]]:
    """Module -> the SDK modules it imports."""
    names = _module_names(root)
    known = set(names)
    return {name: imports_of(name, path.name == "__init__.py", path.read_text(), known) for name, path in names.items()}


def upward(graph: Mapping[str, Set[str]], folders: Set[str]) -> List[str]:
    """Every import of a higher layer, and of another backend's folder."""
    found = []
    for module, targets in sorted(graph.items()):
        here = layer_of(module, folders)
        for target in sorted(targets):
            there = layer_of(target, folders)
            if there > here:
                found.append(f"{module} ({LAYERS[here]}) imports {target} ({LAYERS[there]})")
            elif here == there == 3 and module.split(".")[1] != target.split(".")[1]:
                found.append(f"{module} imports another backend's {target}")
    return found


def circles(graph: Mapping[str, Set[str]]) -> List[List[str]]:
    """The import circles of ``graph``: each strongly connected group of two or more modules, sorted."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    found: List[List[str]] = []

    def visit(start: str) -> None:  # Tarjan's algorithm, with an explicit stack of (module, its targets left)
        work: List[Tuple[str, List[str]]] = [(start, sorted(graph.get(start, ())))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            module, left = work[-1]
            if left:
                target = left.pop()
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    work.append((target, sorted(graph.get(target, ()))))
                elif target in stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1:
                    found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def test_imports_only_point_down() -> None:
    assert upward(import_graph(), backend_folders()) == [], "a lower layer imports a higher one: see the docstring"


def test_no_module_of_the_sdk_is_in_an_import_circle() -> None:
    assert circles(import_graph()) == [], "modules that import each other: move what both need below them"


def test_the_layers_cover_the_sdk_as_docs_say() -> None:
    graph = import_graph()
    folders = backend_folders()
    assert folders >= {"local", "modelarts", "volcano"}
    where = {module: LAYERS[layer_of(module, folders)] for module in graph}
    assert where["backends.registry"] == where["backends.volcano.options"] == where["errors"] == "facts"
    assert where["spec.model"] == where["spec.loader"] == where["plan"] == "spec"
    assert where["backends.base"] == "backends' shared parts"
    assert where["backends.local.backend"] == where["backends.local.queue.scheduler"] == "one backend"
    assert where["opening"] == where["profiles.apply"] == "profiles"
    assert where["job"] == where["sweep.api"] == "the Python API"
    assert where["cli.entry"] == where[""] == "the faces"
    assert {"backends.registry", "profiles.check"} <= graph["opening"]  # the graph sees function-level imports


def _graph(edges: Sequence[Tuple[str, str]]) -> Dict[str, Set[str]]:
    graph: Dict[str, Set[str]] = {}
    for module, target in edges:
        graph.setdefault(module, set()).add(target)
        graph.setdefault(target, set())
    return graph


def test_the_checks_see_a_crafted_violation() -> None:
    folders = {"local", "volcano"}
    graph = _graph([
        ("backends.registry", "profiles.check"), ("profiles.check", "backends.registry"),  # a circle, and upward
        ("spec.model", "backends.base"),  # upward
        ("backends.local.backend", "backends.volcano.client"),  # another backend's folder
        ("backends.local.backend", "backends.local.jobdir"), ("cli.submit", "opening"), ("opening", "errors"),
        ("backends.volcano.options", "spec.checks"),
    ])  # fmt: skip
    assert upward(graph, folders) == [
        "backends.local.backend imports another backend's backends.volcano.client",
        "backends.registry (facts) imports profiles.check (profiles)",
        "spec.model (spec) imports backends.base (backends' shared parts)",
    ]
    assert circles(graph) == [["backends.registry", "profiles.check"]]
    assert circles(_graph([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e"), ("e", "d")])) == [
        ["a", "b", "c"], ["d", "e"],
    ]  # fmt: skip


def test_the_imports_are_read_wherever_they_stand(tmp_path: Path) -> None:
    (tmp_path / "backends").mkdir()
    (tmp_path / "backends" / "__init__.py").write_text("")
    (tmp_path / "backends" / "registry.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from ..errors import ConfigError\n"
        "if TYPE_CHECKING:\n    from .base import Backend\n"
        "def open_backend() -> None:\n    from ..profiles.check import check_keys\n"
        "    from malaunch.sdk.profiles import apply\n"
    )
    for name in ("errors.py", "backends/base.py", "profiles/__init__.py", "profiles/check.py", "profiles/apply.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    graph = import_graph(tmp_path)
    assert graph["backends.registry"] == {"errors", "backends.base", "profiles.check", "profiles.apply"}
    assert upward(graph, backend_folders(tmp_path)) == [
        "backends.registry (facts) imports backends.base (backends' shared parts)",
        "backends.registry (facts) imports profiles.apply (profiles)",
        "backends.registry (facts) imports profiles.check (profiles)",
    ]


def test_a_module_outside_every_layer_is_a_face() -> None:
    assert layer_of("newthing", set()) == len(LAYERS) - 1
    assert layer_of("backends.toy.options", {"toy"}) == 0
    assert layer_of("backends.toy.backend", {"toy"}) == 3
    assert layer_of("backends.toy.backend", set()) == 2  # not a folder with __init__.py: a shared module


#: The most lines a backend's class may have: past it, its work wants a collaborator named by what it does.
MAX_BACKEND_CLASS_LINES = 250


def backend_class_sizes(root: Path = SDK) -> Dict[str, int]:
    """``<module>.<class>`` -> lines, for every class in a backend folder whose bases name ``Backend``."""
    sizes = {}
    for path in sorted((root / "backends").glob("*/*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and any(getattr(base, "id", "") == "Backend" for base in node.bases):
                name = f"{path.relative_to(root).with_suffix('').as_posix().replace('/', '.')}.{node.name}"
                sizes[name] = (node.end_lineno or node.lineno) - node.lineno + 1
    return sizes


def test_no_backend_class_is_over_its_size() -> None:
    sizes = backend_class_sizes()
    assert {"backends.local.backend.LocalBackend", "backends.volcano.backend.VolcanoBackend"} <= set(sizes)
    over = {name: lines for name, lines in sizes.items() if lines > MAX_BACKEND_CLASS_LINES}
    assert over == {}, "move a part of the backend's work into a collaborator of its folder (docs/sdk.md)"


def test_the_size_check_sees_a_big_backend(tmp_path: Path) -> None:
    (tmp_path / "backends" / "big").mkdir(parents=True)
    body = "".join(f"    def m{i}(self) -> None:\n        pass\n\n" for i in range(130))
    (tmp_path / "backends" / "big" / "backend.py").write_text(f"class BigBackend(Backend):\n{body}")
    assert backend_class_sizes(tmp_path) == {"backends.big.backend.BigBackend": 390}


def test_wait_and_its_keyword_arguments_have_one_home() -> None:
    """``JobHandle.wait`` declares what a wait takes (timeout, poll interval, sleep, clock) and its loop's contract;
    a backend's handle changes how it waits (``_wait``), never ``wait`` itself, so no copy of its keyword arguments
    and their defaults can drift from it (they were written again on the local handle and the local backend)."""
    handles = [cls for cls in vars(local_backend).values() if isinstance(cls, type) and issubclass(cls, JobHandle)]
    assert local_backend.LocalJobHandle in handles
    assert [cls.__name__ for cls in handles if cls.wait is not JobHandle.wait] == []
    assert not hasattr(local_backend.LocalBackend, "wait")  # the handle's: a backend has no wait of its own
