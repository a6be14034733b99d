"""This tree's shim against an earlier commit's, side by side in one run (``bench/run.py --baseline REF``).

Both run from a link farm on ``PYTHONPATH`` (``<farm>/malaunch/entrypoint`` -> the tree's ``entrypoint/``, and
``sdk`` -> its ``sdk/``), the same interpreter, the same bytecode state: the only difference is the code. The
earlier commit is checked out once into ``bench/results/baseline-<sha>/`` (a detached git worktree; removed with
``git worktree remove``).
"""

from __future__ import annotations

import compileall
import subprocess
from pathlib import Path
from typing import Dict, Tuple

from .procs import BENCH_DIR, REPO, BenchError

__all__ = ["FARMS", "baseline_tree", "prepare_farms", "resolve_commit", "sdk_farms"]

#: kind suffix ("this", "baseline") -> the PYTHONPATH folder that mounts that tree's shim
FARMS: Dict[str, Path] = {}


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise BenchError(f"git {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def _farm(name: str, tree: Path) -> Path:
    farm = BENCH_DIR / "results" / f"farm-{name}"
    for package in ("entrypoint", "sdk"):  # the shim (start-up) and the SDK (the verbs of ma-submit)
        link = farm / "malaunch" / package
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(tree / package)
        compileall.compile_dir(str(tree / package), quiet=1)
    return farm


def resolve_commit(ref: str) -> str:
    """The full commit ``ref`` names.

    Raises:
        BenchError: it names no commit of this repository (one line: the value and what to give instead).
    """
    try:
        return _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except BenchError:
        raise BenchError(
            f"--baseline {ref!r} is not a commit of this repository; give a commit, tag or branch, e.g. HEAD~1"
        ) from None


def baseline_tree(short: str) -> Path:
    """The checked-out tree of the baseline commit ``short`` (as :func:`prepare_farms` names it)."""
    return BENCH_DIR / "results" / f"baseline-{short}"


def prepare_farms(ref: str) -> str:
    """Check ``ref`` out (once) and mount it and this tree; returns the commit's short name."""
    sha = resolve_commit(ref)
    short = sha[:8]
    tree = BENCH_DIR / "results" / f"baseline-{short}"
    if not (tree / "entrypoint").is_dir():
        _git("worktree", "add", "--detach", str(tree), sha)
    FARMS["baseline"] = _farm(f"baseline-{short}", tree)
    FARMS["this"] = _farm("this", REPO)
    return short


def sdk_farms(ref: str) -> Tuple[str, Path, Path]:
    """The farms of this tree and of ``ref`` (each mounts the SDK and the shim): ``(short name, this, ref's)``."""
    short = prepare_farms(ref)
    return short, FARMS["this"], FARMS["baseline"]
