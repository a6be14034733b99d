"""The public surface of malaunch.entrypoint is explicit, sorted and importable; every module declares __all__."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import malaunch.entrypoint


def test_the_package_root_exports_nothing_and_imports_nothing() -> None:
    # each name is imported from its home (the root's docstring lists them); importing the package costs nothing
    assert malaunch.entrypoint.__all__ == []
    code = ("import sys, malaunch; before = set(sys.modules); import malaunch.entrypoint; "
            "print(sorted(set(sys.modules) - before))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['malaunch.entrypoint']"


def test_every_module_has_a_docstring_and_all() -> None:
    for info in pkgutil.walk_packages(malaunch.entrypoint.__path__, prefix="malaunch.entrypoint."):
        module = importlib.import_module(info.name)
        assert module.__doc__, f"{info.name} has no docstring"
        if not info.name.endswith("__main__"):
            assert isinstance(getattr(module, "__all__", None), list), f"{info.name} has no __all__"
            for name in module.__all__:
                assert hasattr(module, name), f"{info.name}.__all__ names missing {name}"
