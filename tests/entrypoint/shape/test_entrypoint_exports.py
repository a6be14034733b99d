"""The public surface of malaunch.entrypoint is explicit, sorted and importable; every module declares __all__."""

from __future__ import annotations

import importlib
import pkgutil

import malaunch.entrypoint

EXPECTED = [
    "ClusterEnv", "ConfigError", "EntrypointError", "Failure", "LaunchError", "LaunchInputs", "LaunchPlan",
    "ProcessSpec", "RankTable", "RankTableError", "RunResult", "WaitTimeout", "main", "parse_cluster_env",
    "parse_rank_table", "plan_launch", "read_rank_table", "run_plan", "select_server", "wait_for_rank_table",
]  # fmt: skip


def test_all_is_explicit_and_sorted() -> None:
    assert malaunch.entrypoint.__all__ == EXPECTED
    assert sorted(EXPECTED, key=lambda n: (n[0].islower(), n)) == EXPECTED


def test_every_exported_name_exists() -> None:
    for name in EXPECTED:
        assert getattr(malaunch.entrypoint, name) is not None


def test_every_module_has_a_docstring_and_all() -> None:
    for info in pkgutil.walk_packages(malaunch.entrypoint.__path__, prefix="malaunch.entrypoint."):
        module = importlib.import_module(info.name)
        assert module.__doc__, f"{info.name} has no docstring"
        if not info.name.endswith("__main__"):
            assert isinstance(getattr(module, "__all__", None), list), f"{info.name} has no __all__"
            for name in module.__all__:
                assert hasattr(module, name), f"{info.name}.__all__ names missing {name}"
