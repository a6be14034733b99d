"""The shim's folders show its flow, and imports only point down (issue 18).

Layers, lowest first: ``contract/`` (the environment-contract table, errors, the cluster environment) ->
``plan/`` (rank tables, inputs, the ``LaunchPlan``) -> ``report/`` (facts, root cause, classes, report.json) ->
``run/`` (supervisor, output, process tree, the attempt loop, the ``Launcher`` interface) -> ``launchers/`` (one
module per method) -> the top (``start.py``, ``runphase.py``, ``main.py``, ``__init__.py``, ``__main__.py``). A
module may import from its own layer or any layer below, never from one above: checked on every import, including
those inside functions and ``TYPE_CHECKING`` blocks.

Inside ``run/`` two rooms stand apart (issue 27): ``run/output/`` (log files and the console) and ``run/procs/``
(the processes and their ownership: ``/proc``, proof, cgroup, watchdog, guards). Neither imports the other; what
needs both (the supervisor, the worker view, hang detection) sits in ``run/`` itself.

Across the layers the shim runs in two phases (issue 41): the planning phase (``start.py``, the launchers' planning
registry ``launchers/planning.py`` and the planners it names) imports, at run time, none of the run phase's modules
(the supervisor, the attempt loop, the hosts' coordinator, the notifier, the output pumps, the report writer); what a
dry run needs is a module apart from what a run needs, never an import deferred into a function.

The SDK uses the shim through one module only, ``public.py`` (top layer): no ``sdk/`` module imports any other
module of the shim, so the shim's folders can move without the SDK following them.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from malaunch.entrypoint.run.procs import reaper as _reaper
from malaunch.entrypoint.run.procs.bareboot import boot_text

SHIM = Path(__file__).resolve().parents[3] / "entrypoint"
SDK = Path(__file__).resolve().parents[3] / "sdk"
PACKAGE = "malaunch.entrypoint"
PUBLIC = f"{PACKAGE}.public"
LAYERS = ("contract", "plan", "report", "run", "launchers")
TOP = len(LAYERS)
#: Rooms of one layer that never import each other.
ROOMS = (("run", "output"), ("run", "procs"))


def _layer(parts: Tuple[str, ...]) -> int:
    """The layer of a module given by its parts under the package (``("run", "supervisor")``)."""
    return LAYERS.index(parts[0]) if parts and parts[0] in LAYERS else TOP


def _target(module: Tuple[str, ...], is_package: bool, node: ast.ImportFrom) -> Optional[Tuple[str, ...]]:
    """The parts under the package an import names (None: outside the package)."""
    if node.level == 0:
        name = node.module or ""
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            return None
        return tuple(name.split(".")[2:])
    here = module if is_package else module[:-1]
    base = here[: len(here) - (node.level - 1)]
    return (*base, *(node.module.split(".") if node.module else ()))


def _edges() -> List[Tuple[str, str, int, int]]:
    """(module, imported, layer of module, layer of imported) for every import inside the package."""
    found = []
    for path in sorted(SHIM.rglob("*.py")):
        rel = path.relative_to(SHIM).with_suffix("")
        parts = tuple(rel.parts)
        is_package = parts[-1] == "__init__"
        module = parts[:-1] if is_package else parts
        for node in ast.walk(ast.parse(path.read_text())):
            targets: List[Tuple[str, ...]] = []
            if isinstance(node, ast.ImportFrom):
                target = _target(module, is_package, node)
                if target is not None:
                    # "from . import x" / "from ..run import proctree": the names may be modules of that package
                    targets = [target] if target else [(alias.name,) for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [tuple(a.name.split(".")[2:]) for a in node.names if a.name.startswith(PACKAGE + ".")]
            for target in targets:
                found.append((path.relative_to(SHIM).as_posix(), ".".join(target), _layer(module), _layer(target)))
    return found


def test_imports_only_point_down() -> None:
    upward = [f"{module} imports {target}" for module, target, here, there in _edges() if there > here]
    assert upward == [], "a lower layer imports a higher one: pass a hook (run/launcher.py) instead"


def _room(dotted: str) -> Optional[Tuple[str, ...]]:
    parts = tuple(dotted.split("."))
    return next((room for room in ROOMS if parts[: len(room)] == room), None)


def _crossings(edges: List[Tuple[str, str, int, int]]) -> List[str]:
    found = []
    for module, target, _, _ in edges:
        here = _room(module[: -len(".py")].replace("/", ".").removesuffix(".__init__"))
        there = _room(target)
        if here is not None and there is not None and here != there:
            found.append(f"{module} imports {target}")
    return found


def test_the_output_and_process_rooms_do_not_import_each_other() -> None:
    assert _crossings(_edges()) == [], "output and process ownership are two rooms: pass what one needs from run/"
    assert all((SHIM / Path(*room)).is_dir() for room in ROOMS)


def test_the_room_check_sees_a_crossing() -> None:
    edges = [("run/output/pump.py", "run.procs.proctree", 3, 3), ("run/procs/__init__.py", "run.output", 3, 3),
             ("run/supervisor.py", "run.procs.guards", 3, 3), ("run/output/sink.py", "run.output.pump", 3, 3)]
    assert _crossings(edges) == ["run/output/pump.py imports run.procs.proctree",
                                 "run/procs/__init__.py imports run.output"]  # fmt: skip


def test_the_layers_are_folders_and_nothing_else_sits_beside_them() -> None:
    folders = sorted(p.name for p in SHIM.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(LAYERS)
    loose = sorted(p.name for p in SHIM.glob("*.py"))
    # beside the layers: the entry points (the planning phase, start.py, the run phase, runphase.py, and main.py,
    # which joins them with the hosts' coordinator), the SDK's seam, and the scripts' checkpoint helper (it runs in
    # the ranks)
    assert loose == ["__init__.py", "__main__.py", "checkpoint.py", "main.py", "public.py", "runphase.py", "start.py"]


#: The run phase: modules the planning phase must not load (``runphase.py`` and ``main.py`` join them to it).
RUN_PHASE = ("main", "runphase", "launchers.running", "run.supervisor", "run.attempts", "run.hosts", "run.notifier",
             "run.output", "report.report", "report.reportfile", "run.procs")  # fmt: skip


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _runtime_imports(dotted: str) -> List[str]:
    """The shim modules ``dotted`` (parts under the package, dotted) imports when it runs: every import outside
    ``if TYPE_CHECKING:`` blocks, a package's ``__init__`` included for each module under it."""
    parts = tuple(dotted.split(".")) if dotted else ()
    path = SHIM.joinpath(*parts)
    is_package = path.is_dir()
    source = path / "__init__.py" if is_package else path.with_suffix(".py")
    if not source.exists():
        return []
    found: List[str] = []
    stack: List[ast.AST] = [ast.parse(source.read_text())]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt) and _is_type_checking(child):
                continue
            if isinstance(child, ast.ImportFrom):
                target = _target(parts, is_package, child)
                if target is not None:
                    names = [target] if target else [(alias.name,) for alias in child.names]
                    for name in names:
                        found.append(".".join(name))
                        found.extend(".".join((*name, alias.name)) for alias in child.names)
            elif isinstance(child, ast.Import):
                found += [".".join(a.name.split(".")[2:]) for a in child.names if a.name.startswith(PACKAGE + ".")]
            stack.append(child)
    return found


def _loaded_by(start: str) -> set[str]:
    """Every shim module importing ``start`` loads (as far as the source says), packages' roots included."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        dotted = todo.pop()
        if dotted in seen or not (SHIM.joinpath(*dotted.split(".")).is_dir()
                                  or SHIM.joinpath(*dotted.split(".")).with_suffix(".py").exists()):
            continue
        seen.add(dotted)
        pieces = dotted.split(".")
        todo += [".".join(pieces[:i]) for i in range(1, len(pieces))]  # the packages above it run first
        todo += _runtime_imports(dotted)
    return seen


def _in_run_phase(modules: set[str]) -> List[str]:
    return sorted(m for m in modules if any(m == r or m.startswith(r + ".") for r in RUN_PHASE))


def test_the_planning_phase_loads_none_of_the_run_phase() -> None:
    assert _in_run_phase(_loaded_by("start")) == [], "a dry run needs this: split the module, do not defer"
    assert {"launchers.planning", "launchers.torchrun.plan", "plan.rank_table"} <= _loaded_by("start")
    assert "run.supervisor" in _loaded_by("main")  # the check follows imports: main joins the run phase


def test_the_run_phase_loads_no_module_of_the_hosts_coordinator() -> None:
    # A one-host run loads the run phase, not the coordinator (its package root holds only its settings): the
    # coordinated loop is the run phase's plug, given by main.py and by the entry script for a plan of several hosts.
    loaded = _loaded_by("runphase")
    assert sorted(m for m in loaded if m.startswith("run.hosts.")) == [], "plug it in from main.py, do not import it"
    assert {"run.supervisor", "run.attempts", "launchers.running"} <= loaded
    assert "run.hosts.jobloop" in _loaded_by("main")


#: What the SDK's seam does not load: every SDK process (each verb of ``ma-submit``) imports ``public.py`` whole, so a
#: module the seam's names need only for the shim's run costs every verb its import (the run's records, the cluster
#: environment's parser).
NOT_FOR_THE_SEAM = ("report.report", "contract.cluster_env")


def test_the_seam_loads_no_module_only_the_run_needs() -> None:
    loaded = _loaded_by("public")
    assert sorted(m for m in loaded if m in NOT_FOR_THE_SEAM) == [], "give the name a module of its own"
    assert {"run.attempt_status", "run.prepare_status", "report.reportfile"} <= loaded


def test_the_phase_check_sees_an_import_of_the_run_phase() -> None:
    assert _in_run_phase({"plan.build", "run.output.pump", "run.launcher", "run.hosts"}) == ["run.hosts",
                                                                                            "run.output.pump"]
    assert "run.output" in _loaded_by("launchers.torchrun.launcher")


def test_the_check_sees_the_imports() -> None:
    edges = _edges()
    layers: Dict[str, int] = {module: here for module, _, here, _ in edges}
    assert layers["run/supervisor.py"] == LAYERS.index("run")
    assert layers["main.py"] == TOP
    assert ("launchers/torchrun/plan.py", "run.launcher") in {(m, t) for m, t, _, _ in edges}
    assert ("plan/launch_plan.py", "contract") in {(m, t) for m, t, _, _ in edges}


@pytest.mark.parametrize(
    ("module", "line", "level", "expected"),
    [
        (("run", "supervisor"), "from ..report.rootcause import Death", 2, ("report", "rootcause")),
        (("run", "supervisor"), "from .ending import Ending", 1, ("run", "ending")),
        (("launchers",), "from .torchrun import T", 1, ("launchers", "torchrun")),
        (("main",), "from .run.attempts import x", 1, ("run", "attempts")),
    ],
)
def test_relative_imports_resolve(module: Tuple[str, ...], line: str, level: int, expected: Tuple[str, ...]) -> None:
    node = ast.parse(line).body[0]
    assert isinstance(node, ast.ImportFrom) and node.level == level
    is_package = module == ("launchers",)
    assert _target(module, is_package, node) == expected


def test_every_module_of_the_shim_needs_only_the_standard_library() -> None:
    code = (
        "import sys, pkgutil, importlib\n"
        "before = set(sys.modules)\n"
        "import malaunch.entrypoint as shim\n"
        "names = [i.name for i in pkgutil.walk_packages(shim.__path__, prefix='malaunch.entrypoint.')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "std = set(sys.stdlib_module_names) | {'malaunch'}\n"
        "print(len(names), ','.join(sorted(m for m in new if m not in std and not m.startswith('_'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    count, foreign = done.stdout.split(" ", 1)
    assert int(count) > 40 and foreign.strip() == ""


def _shim_imports_of(path: Path) -> List[Tuple[int, str]]:
    """(line, imported module) for every import of a shim module in the SDK file ``path`` (any nesting)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names: List[str] = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] if node.module != PACKAGE else [f"{PACKAGE}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found.extend((node.lineno, name) for name in names if name == PACKAGE or name.startswith(PACKAGE + "."))
    return found


def _sdk_seam_breaches() -> List[str]:
    return [
        f"{path.relative_to(SDK).as_posix()}:{line} imports {name}"
        for path in sorted(SDK.rglob("*.py"))
        for line, name in _shim_imports_of(path)
        if name != PUBLIC
    ]


@pytest.mark.slow
def test_the_sdk_uses_the_shim_only_through_its_public_module() -> None:
    assert _sdk_seam_breaches() == [], f"the SDK imports the shim only through {PUBLIC}: add the name there"
    uses = {name for path in SDK.rglob("*.py") for _, name in _shim_imports_of(path)}
    assert uses == {PUBLIC}


def test_the_seam_check_sees_every_form_of_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from malaunch.entrypoint.public import write_atomic\n"
        "from malaunch.entrypoint.run import proctree\n"
        "import malaunch.entrypoint.contract\n"
        "def f():\n    from malaunch.entrypoint import public, main\n"
    )
    assert [name for _, name in _shim_imports_of(sample)] == [
        PUBLIC, f"{PACKAGE}.run", f"{PACKAGE}.contract", PUBLIC, f"{PACKAGE}.main",
    ]  # fmt: skip


def _bare_modules(module: str) -> List[str]:
    """The modules a bare interpreter started as the shim starts its watchdog holds once ``module`` is imported."""
    mount = boot_text(module).split("from malaunch")[0]
    probe = mount + f"import {PACKAGE}.{module}\nprint(' '.join(sorted(sys.modules)))\n"
    argv = _reaper.watchdog_argv(0, "token", 1.0)
    flags = argv[1 : argv.index("-c")]
    done = subprocess.run([sys.executable, *flags, "-c", probe, argv[argv.index("-c") + 2]], capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    loaded = done.stdout.split()
    assert f"{PACKAGE}.{module}" in loaded
    return loaded


def test_the_watchdog_program_loads_no_ctypes() -> None:
    # it names itself through /proc/self/comm, not a prctl: neither stage loads ctypes
    for module in ("run.procs.watchdog", "run.procs.watchdog_end"):
        loaded = _bare_modules(module)
        assert not [name for name in loaded if name in ("ctypes", "_ctypes")], (module, loaded)


def test_the_watchdog_listens_with_os_sys_and_signal_alone() -> None:
    # its first stage runs beside the ranks: no typing and no process-tree code until the shim is gone
    shim = sorted(name for name in _bare_modules("run.procs.watchdog") if name.startswith(f"{PACKAGE}."))
    assert shim == [f"{PACKAGE}.run", f"{PACKAGE}.run.procs", f"{PACKAGE}.run.procs.bareboot",
                    f"{PACKAGE}.run.procs.watchdog"]  # fmt: skip
    assert "typing" not in _bare_modules("run.procs.watchdog")
