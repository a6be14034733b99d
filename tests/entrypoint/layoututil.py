"""Checks of a source tree's shape shared by the SDK's and the shim's layout tests."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import List

__all__ = ["prefix_families"]


def prefix_families(root: Path) -> List[str]:
    """Folders under ``root`` (``root`` too) holding three or more modules whose names share a prefix before an
    underscore (``torchrun.py``, ``torchrun_gate.py``, ``torchrun_logs.py``; a leading ``_`` is ignored): such a
    family wants a folder. One line per family: the folder, the sorted modules, how many have the prefix."""
    families: List[str] = []
    for folder in [root, *sorted(p for p in root.rglob("*") if p.is_dir() and p.name != "__pycache__")]:
        stems = [p.stem for p in folder.glob("*.py") if not p.stem.startswith("__")]
        counts = Counter(stem.lstrip("_").split("_")[0] for stem in stems if "_" in stem.lstrip("_"))
        for prefix, count in counts.items():
            siblings = [s for s in stems if s.lstrip("_") == prefix or s.lstrip("_").startswith(prefix + "_")]
            if len(siblings) >= 3:
                families.append(f"{folder.relative_to(root)}: {sorted(siblings)} ({count})")
    return families
