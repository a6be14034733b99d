"""The public surface of malaunch.sdk is explicit: ``__all__`` is sorted, complete and importable."""

from __future__ import annotations

import importlib
import pkgutil

import malaunch.sdk

EXPECTED = [
    "Backend", "BackendError", "BackendNotAvailable", "ConfigError", "DataSpec", "ExecElsewhere", "ExecResult",
    "HostState", "HostStatus", "HostUsage", "Job", "JobEvent", "JobHandle", "JobNotFound", "JobNotRunning", "JobSpec",
    "JobState", "JobStatus", "LauncherOptions", "MalaunchError", "Resources", "SpecError", "SubmitPlan", "Sweep",
    "SweepHandle", "SweepNotFound", "UsageReport", "WaitTimeout", "attach", "attach_sweep", "available_backends",
    "get_backend", "load_job_file", "spec_from_mapping",
]  # fmt: skip


def test_all_is_explicit_and_sorted() -> None:
    assert malaunch.sdk.__all__ == EXPECTED
    assert sorted(malaunch.sdk.__all__) == malaunch.sdk.__all__


def test_every_name_exists() -> None:
    for name in malaunch.sdk.__all__:
        assert getattr(malaunch.sdk, name) is not None


def test_public_names_are_not_private_modules() -> None:
    public = {name for name in dir(malaunch.sdk) if not name.startswith("_")}
    modules = {info.name for info in pkgutil.iter_modules(malaunch.sdk.__path__)}
    assert public - set(malaunch.sdk.__all__) <= modules | {"annotations"}


def test_every_module_has_all_and_docstring() -> None:
    names = ["malaunch.sdk"] + [
        info.name for info in pkgutil.walk_packages(malaunch.sdk.__path__, prefix="malaunch.sdk.")
    ]
    for name in names:
        module = importlib.import_module(name)
        assert module.__doc__, f"{name} has no docstring"
        assert isinstance(getattr(module, "__all__", None), list), f"{name} has no __all__"
        for exported in module.__all__:
            assert hasattr(module, exported), f"{name}.__all__ lists missing {exported}"
