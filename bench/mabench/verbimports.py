"""Where a verb's start-up goes: each process of the ``verbs`` case run under ``python -X importtime``.

Each module's own import time (its "self" column) is kept at its smallest over the runs, then summed by who
imports it: the **interpreter** (every module ``python -c pass`` imports too: ``site``, the editable install's
finder, ``pathlib``...), **click** (click and the standard-library modules it is first to import), the **SDK**
(``malaunch.sdk.*``), the **shim** (``malaunch.entrypoint.*``, through the SDK's seam) and **other stdlib** (what
the SDK or the shim is first to import). A module is counted where it is first imported in that process, so a
module both click and the SDK use is click's when click comes first. ``-X importtime`` adds its own overhead:
the sums say where the time goes, the wall and CPU columns say how long it takes.
"""

from __future__ import annotations

import subprocess
from typing import Dict, List, Mapping, Sequence, Set, Tuple

__all__ = ["GROUPS", "import_times"]

#: The groups, in the order the report shows them.
GROUPS = ("interpreter", "click", "SDK", "shim", "other stdlib")


def _entries(argv: Sequence[str], env: Mapping[str, str]) -> List[Tuple[int, str, int]]:
    """(depth, module, self microseconds) of one run, in the order ``-X importtime`` prints them."""
    done = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    found = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = line.split(":", 1)[1].split("|")
        found.append(((len(name) - len(name.lstrip(" "))) // 2, name.strip(), int(own)))
    return found


def _group(module: str, ancestors: Sequence[str], floor: Set[str]) -> str:
    if module in floor:
        return "interpreter"
    if any(name == "click" or name.startswith("click.") for name in (module, *ancestors)):
        return "click"
    if module.startswith("malaunch.entrypoint"):
        return "shim"
    if module == "malaunch" or module.startswith("malaunch."):
        return "SDK"
    return "other stdlib"


def _one_run(entries: Sequence[Tuple[int, str, int]], floor: Set[str]) -> Dict[str, Tuple[str, int]]:
    """module -> (group, self microseconds); a child is printed before its parent, so walk from the end."""
    out: Dict[str, Tuple[str, int]] = {}
    stack: List[Tuple[int, str]] = []
    for depth, module, own in reversed(entries):
        while stack and stack[-1][0] >= depth:
            stack.pop()
        out[module] = (_group(module, [name for _, name in stack], floor), own)
        stack.append((depth, module))
    return out


def import_times(
    floor_argv: Sequence[str], subjects: Sequence[Tuple[str, Sequence[str], Mapping[str, str]]], runs: int
) -> Dict[str, Dict[str, float]]:
    """subject -> group -> seconds (the sum of each module's smallest self time over ``runs`` runs, the subjects
    taken in turn in each run so that a drift of the machine's speed hits them alike)."""
    floor_env = subjects[0][2] if subjects else {}
    floor = {module for _, module, _ in _entries(floor_argv, floor_env)}
    best: Dict[str, Dict[str, Tuple[str, int]]] = {name: {} for name, _, _ in subjects}
    for _ in range(runs):
        for name, argv, env in subjects:
            for module, (group, own) in _one_run(_entries(argv, env), floor).items():
                if module not in best[name] or own < best[name][module][1]:
                    best[name][module] = (group, own)
    result: Dict[str, Dict[str, float]] = {}
    for name, modules in best.items():
        sums = {group: 0.0 for group in GROUPS}
        for group, own in modules.values():
            sums[group] += own / 1e6
        result[name] = sums
    return result
