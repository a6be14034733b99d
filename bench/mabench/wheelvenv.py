"""This tree installed as a container installs it: built as a wheel, put into a fresh venv with nothing else.

The project venv installs malaunch in editable mode, whose ``.pth`` finder runs at every interpreter start-up
(and imports pathlib, re, urllib...): a cost no container pays. :func:`wheel_venv` builds this tree's wheel once
with the project venv (offline: no build isolation, no dependencies) and installs it with ``--no-deps`` into a
throwaway ``python -m venv`` (the shim needs only the standard library), so that venv's ``ma-entrypoint`` and its
``python -c pass`` are what an image runs.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import List, NamedTuple

from .procs import PYTHON, REPO, BenchError

__all__ = ["WheelVenv", "wheel_venv"]

#: What the wheel is built from (pyproject.toml names the README as the long description).
_SOURCES = ("pyproject.toml", "README.md", "sdk", "entrypoint")


class WheelVenv(NamedTuple):
    """A throwaway venv holding only this tree's wheel."""

    python: str  # its interpreter
    entrypoint: str  # its ``ma-entrypoint`` console script
    wheel: str  # the wheel's file name


def _run(argv: List[str], what: str) -> None:
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600, check=False)
    if done.returncode != 0:
        tail = done.stdout.decode(errors="replace").strip().splitlines()[-3:]
        raise BenchError(f"{what} failed (exit {done.returncode}): {' / '.join(tail)}")


def wheel_venv(scratch: Path, tree: Path = REPO) -> WheelVenv:
    """Build ``tree``'s wheel (this tree's by default) into ``scratch/wheel`` and install it into a new venv
    ``scratch/venv``.

    Raises:
        BenchError: the build, the venv or the install failed (the last lines of its output say why).
    """
    wheels, venv, source = scratch / "wheel", scratch / "venv", scratch / "source"
    # Built from a copy: setuptools keeps a build/ folder in the tree it builds, whose stale files (a module since
    # moved) would go into the wheel, and the repository is left as it was.
    source.mkdir(parents=True)
    for name in _SOURCES:
        if (tree / name).is_dir():
            shutil.copytree(tree / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(tree / name, source / name)
    _run([PYTHON, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", "-w",
          str(wheels), str(source)], "building this tree's wheel")  # fmt: skip
    built = sorted(wheels.glob("malaunch-*.whl"))
    if not built:
        raise BenchError(f"building this tree's wheel made no malaunch-*.whl in {wheels}")
    _run([PYTHON, "-m", "venv", "--without-pip", str(venv)], "creating a venv for the wheel")
    python = str(venv / "bin" / "python")
    _run([PYTHON, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--no-index", str(built[-1])],
         "installing the wheel")  # fmt: skip
    entrypoint = venv / "bin" / "ma-entrypoint"
    if not entrypoint.exists():
        raise BenchError(f"the wheel installed no ma-entrypoint script in {entrypoint.parent}")
    return WheelVenv(python, str(entrypoint), built[-1].name)
